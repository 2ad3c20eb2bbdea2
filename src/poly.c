/* poly.c -- placeholder */
