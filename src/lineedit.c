/* lineedit.c -- placeholder */
