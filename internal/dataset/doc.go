// Package dataset turns a spec (runs of one line, product and recipe; nodes
// with roles; beat, history, horizon, stride; cleaning; split) into a
// versioned, hashed dataset directory (docs/dataset-format.md): Build reads
// each run's samples from the store, cleans and aligns them on the beat
// grid (Clean, Align), splits runs or time blocks, plans the windows,
// computes the train-only normalisation, writes the arrays while hashing
// them, and registers the result. Verify, Bundle and the serve helpers read
// a dataset back.
//
// # Cost of a build
//
// A build should cost little more than reading its samples
// (bench/dataset.sh compares it with bench/rawread, the plain paged read of
// the same rows, on one core: CPU=0). So:
//
//   - Reading: runs are read ahead by up to two readers while earlier runs
//     are cleaned; a run's point slices go back to the readers once it is
//     aligned, so a build allocates the raw samples of a few runs, not of
//     all of them.
//   - Cleaning and alignment (cleaner): the state and range rules run in
//     the pass that extracts a node's times and values into arrays the
//     cleaner reuses for every node of every run; the Hampel test and the
//     bucket means run over those arrays. Align(Clean(points)) is the
//     definition (TestCleanerMatches). The Hampel test judges a side of at
//     most eight points on a sorted stack copy (cleanAgreesSmall) instead of
//     the general selection, and takes the series median for its floor only
//     when it can decide the floor.
//   - Writing: every array of a window is a contiguous range of its run's
//     rows encoded once (runBytes), so a window is five copies, not a write
//     per value; each file is hashed as it is written, never read back.
//     Array files are written with O_DIRECT by a goroutine per file, in
//     buffers that grow with the file (writeBufSize), while the windows
//     are produced; a process with one P gets a second one while a large
//     dataset is written (extraWriterProc), since a direct write otherwise
//     holds the only P until the disk is done and the producer stops.
//   - The report's lag correlations are formed for the train runs only (the
//     only ones pooled), an input's Σa² once for every pair whose target is
//     complete (a target's Σb² likewise), four lags at a time (lagDots);
//     the normalisation keeps one running accumulator per column; summaries
//     read their order statistics by selection (orderStats).
//
// Every one of these computes the same numbers in the same order as the
// plain code it replaced, so datasets stay byte-identical (the golden hash
// in hash_golden_test.go; TestLagSumsBitIdentical, TestSummarizeMatchesSort,
// TestCleanAgreesSmall, TestWindowsEqualGrid). The hand-written loops are
// there for speed; BenchmarkLagSums, BenchmarkCleanAlign and BenchmarkBuild
// measure them (figures in bench/RESULTS.md).
package dataset
