// Package examples embeds the example dataset specs and physics models so
// that commands such as "aml demo" work from any directory with a single
// binary. The files themselves stay plain files under examples/ for people
// to read and copy.
package examples

import "embed"

// FS holds specs/*.json and physics/*.aml.
//
//go:embed specs/*.json physics/*.aml
var FS embed.FS
