#!/bin/sh
# User mistakes: each stops with exit status 1 and exactly the diagnostic in its .err file.
exec sh "$(dirname "$0")/dyntest.sh" tests/errors 1
