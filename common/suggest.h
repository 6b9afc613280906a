/*
 * suggest.h: "did you mean ...?" for a word typed wrong, against a NULL-
 * terminated list of the words that would have been right.  Plain C (libc
 * only: it is in gdconf, which grant-keys links statically).  Used by
 * config.c for unknown keys.
 */
#ifndef GD_SUGGEST_H
#define GD_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

/* Levenshtein distance, case-insensitive, '-' and '_' alike.  SIZE_MAX
 * for a word of 64 characters or more. */
size_t suggest_distance(const char *a, const char *b);

/* The word of words nearest to typed, if near enough to be a typo (at most
 * 3 edits, and at most a third of its letters); NULL if none is.  Borrowed
 * from words. */
const char *suggest_nearest(const char *typed, const char *const *words);

/* typed is one of words. */
bool suggest_in(const char *typed, const char *const *words);

/* words joined by ", " into out (cut short if out is too small). */
void suggest_join(char *out, size_t outlen, const char *const *words);

#endif
