// Command aml is the AML command-line tool: ingest production-line time
// series, build datasets, train and evaluate models, and run the digital
// twin. This file only wires commands; the work lives in internal/.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
