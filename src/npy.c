/* npy.c -- placeholder */
