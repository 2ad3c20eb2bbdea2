#!/bin/sh
# The examples: each runs and prints exactly its expected output (tests/examples/NAME.out).
exec sh "$(dirname "$0")/dyntest.sh" examples 0 tests/examples
