/* tensor.c -- placeholder */
