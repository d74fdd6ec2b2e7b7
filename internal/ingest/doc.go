// Package ingest turns CSV files into samples and writes them to a
// [core.TimeSeries], one file per transaction.
//
// # Shapes
//
// The shape is decided from the header (cell names are trimmed; matching of
// the special names is case-insensitive):
//
//   - long: the columns (ignored ones aside) are exactly
//     <time>,node,value or <time>,node,value,state. Every row is one sample
//     of the node it names; an empty state is "ok".
//   - wide: a time column (or none, with a period) plus one column per node;
//     the node id is the header cell. Every cell is one sample with state ok.
//     Columns listed in IgnoreCols (a row index, say) are not ingested.
//
// # Time
//
// The time column is CSVOptions.TimeCol, or else the one column named time,
// ts, timestamp, datetime, date, t, time_ms, time_s, timestamp_ms, epoch_ms
// or epoch_s (several such columns are an error). Its unit is
// CSVOptions.TimeUnit ("ms", "s", "rfc3339"), or else: a name ending in _ms
// or _s says milliseconds or seconds; otherwise the first time that parses
// decides for the whole file: not a number → RFC 3339, a number of at least
// 1e11 → epoch milliseconds, a smaller number → epoch seconds. Fractions are
// rounded to the nearest millisecond, exactly (decimal arithmetic, not
// float). RFC 3339 times need a zone (Z or ±hh:mm); a space may replace
// the T. A wide file without a time column needs CSVOptions.Period: data row
// k (0-based, bad rows included) is at StartMs + k*Period.
//
// # Cells and bad rows
//
// An empty cell or NaN, NA, null (any case) is a missing value: the node has
// no sample at that row (counted in FileReport.Missing). Values must be
// finite plain decimal numbers. A row is bad when a value is not a number, the
// time does not parse, the number of cells differs from the header, the node
// name of a long row is empty, or a quoted cell is malformed. A bad row fails
// the file with AML_INGEST_INVALID and Field "file:line:col", unless SkipBad
// is set, in which case it is skipped and counted by reason. The reader
// follows RFC 4180 (quoted cells may hold commas, doubled quotes and line
// breaks), accepts CRLF or LF line ends and a UTF-8 byte order mark, trims
// spaces around cells and skips blank lines (except in a one-column file,
// where a blank line between data rows is a missing cell).
//
// # All or nothing
//
// [IngestFiles] runs each file inside one ts.Ingest transaction: an error
// anywhere in a file (bad row, store error, cancellation) rolls the whole
// file back, so a file is never half written. Files ingested before the
// failing one stay committed. [ParseCSV] is the streaming parser underneath;
// it emits batches as it goes and leaves atomicity to the caller.
package ingest
