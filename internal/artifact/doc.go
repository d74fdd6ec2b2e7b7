// Package artifact stores directories of files — a dataset's files, a
// model's artifact — by content, so that a worker on another machine can
// read a dataset and write a model without a shared filesystem.
//
// A directory is named by a key, its '/'-separated path relative to the
// data directory ("datasets/ds-…", "jobs/job-…/artifacts"): the same string
// the registry already records (core.Dataset.Path, core.Model.ArtifactPath),
// so nothing in the registry changes when the store does. Its content
// identity is a Tree: the sha256 of every regular file and the tree hash
// over them, built exactly as model.ArtifactHash builds a model's hash
// (path + "\n" + sha256hex(bytes) + "\n" per file in byte-wise path order),
// so a model's recorded ArtifactHash is also its artifact tree hash.
//
// Two implementations:
//
//   - Local is today's layout: the files live under the data directory at
//     their key and nothing is copied. It is what a single-machine (SQLite)
//     installation uses, with no change in behaviour.
//   - Postgres keeps the files in the database: each file is cut into 1 MiB
//     chunks stored once per sha256 (a chunk shared by two files or two
//     datasets is stored once), a blob row lists a file's chunks, and a
//     tree row maps the key to its files and tree hash. Fetch materialises
//     a key into the local data directory (a cache: a worker reads the
//     files from disk like everyone else) and verifies every chunk, every
//     file and the tree hash on the way; any difference is
//     AML_ARTIFACT_TAMPERED naming the file, and nothing is left under the
//     key's path. A tree row is written last, in its own statement, after
//     every chunk it needs: a reader never sees a half-stored tree.
//
// Why not a blob column per file: datasets reach hundreds of MiB, and a
// bytea value that large is read and written whole (and capped at 1 GiB);
// chunks keep memory flat and let identical content be stored once.
package artifact
