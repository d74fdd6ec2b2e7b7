package main

import "github.com/aml-project/aml/internal/web"

// aml serve mounts the web UI at /ui/ (behind the API's optional
// authentication: pages without a principal go to the login page).
func init() { serveUI = web.Handler }
