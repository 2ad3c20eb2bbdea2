/* hw.c -- placeholder */
