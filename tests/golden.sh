#!/bin/sh
# Golden programs: each runs and prints exactly its .out file.
exec sh "$(dirname "$0")/dyntest.sh" tests/golden 0
