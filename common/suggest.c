/* suggest.c: the nearest word to a typo, by edit distance. */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "suggest.h"
#include "banned.h"

size_t suggest_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[64];

	if (la >= sizeof(row) / sizeof(row[0]) ||
	    lb >= sizeof(row) / sizeof(row[0]))
		return SIZE_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			char ca = (char)tolower((unsigned char)a[i - 1]);
			char cb = (char)tolower((unsigned char)b[j - 1]);
			size_t up = row[j];
			bool same = ca == cb || ((ca == '-' || ca == '_') &&
			                         (cb == '-' || cb == '_'));
			size_t best = diag + !same;
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *suggest_nearest(const char *typed, const char *const *words)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;

	for (; *words; words++) {
		size_t d = suggest_distance(typed, *words);
		if (d < best_d) {
			best_d = d;
			best = *words;
		}
	}
	if (best && best_d <= 3 && best_d * 3 <= strlen(best))
		return best;
	return NULL;
}

bool suggest_in(const char *typed, const char *const *words)
{
	for (; *words; words++)
		if (!strcmp(typed, *words))
			return true;
	return false;
}

void suggest_join(char *out, size_t outlen, const char *const *words)
{
	size_t off = 0;

	if (outlen)
		out[0] = '\0';
	for (; *words && off < outlen; words++) {
		int n = snprintf(out + off, outlen - off, "%s%s",
		                 off ? ", " : "", *words);
		if (n < 0)
			break;
		off += (size_t)n;
	}
}
