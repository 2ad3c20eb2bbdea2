#include "config.h"
#include "dyn.h"
int main(void) { return 0; }
