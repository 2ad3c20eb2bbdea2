/* hw_clock.c -- the clock a core runs at, measured: a chain of dependent integer multiplies
 * (x86-64) or adds (AArch64), whose latency in cycles is the same on every core of the ISA,
 * timed against the wall clock.  /proc/cpuinfo's "cpu MHz" is often the base clock where the
 * cores run faster (a virtual CPU reported 2.1 GHz on cores whose micro-kernel ran at the
 * rate of 3.2), and every compute-bound prediction of the model scales with the clock it is
 * given.  The measurement takes about 1 ms, once per process (a session detects the host
 * more than once): ten trials of 0.1 ms, the fastest kept, since a busy machine interrupts
 * some. */
#include "config.h"
#include "hw_int.h"

#include <pthread.h>
#include <time.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__aarch64__))

/* 100 links a step.  imul r64, r64 has a latency of 3 cycles on every x86-64 core of the
 * last fifteen years (Intel's optimisation manual, AMD's for Zen 1-5); add x, x, x has 1 on
 * Arm's cores.  An add chain is not used on x86: newer Intel cores rename some adds away. */
#if defined(__x86_64__)
#define CHAIN_CYCLES 300.0
#define CHAIN_STEP(x, m) __asm__ volatile(".rept 100\n\timul %1, %0\n\t.endr" : "+r"(x) : "r"(m))
#else
#define CHAIN_CYCLES 100.0
#define CHAIN_STEP(x, m) __asm__ volatile(".rept 100\n\tadd %0, %0, %1\n\t.endr" : "+r"(x) : "r"(m))
#endif

static double clock_ghz;
static pthread_once_t clock_once = PTHREAD_ONCE_INIT;

static void clock_time(void) {
  enum { STEPS = 1000, TRIALS = 10 };
  uint64_t x = 1, m = 3;
  double best = 0;
  for (int t = 0; t < TRIALS; t++) {       /* the fastest trial: the others were interrupted */
    double t0 = now_s();
    for (int i = 0; i < STEPS; i++) CHAIN_STEP(x, m);
    double dt = now_s() - t0;
    if (dt > 0 && (best == 0 || dt < best)) best = dt;
  }
  clock_ghz = best > 0 ? STEPS * CHAIN_CYCLES / best * 1e-9 : 0;
}

double detect_clock_ghz(void) {
  pthread_once(&clock_once, clock_time);
  return clock_ghz;
}

#else

double detect_clock_ghz(void) { return 0; }

#endif
