/*
 * cf_table.c: prints the record table's column families as the compiled
 * code numbers them (node/state/records.h, enum store_cf), one "NAME VALUE" a
 * line.  fuzz/seed_families holds tests/fuzz/records_table.py's reading of
 * records.h against it.
 */
#include <stdio.h>

#include "records.h"

int main(void)
{
#define CF_ROW(cf, name, body, desc, merge, sealed, snap, live, mirror) \
	printf("%s %d\n", #cf, (int)CF_##cf);
	GD_RECORD_KINDS(CF_ROW)
#undef CF_ROW
	return 0;
}
