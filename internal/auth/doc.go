// Package auth is who may do what over AML's serving interfaces (the HTTP
// API, MCP over HTTP and the web UI).
//
// A caller is a Principal: a name (the actor written to the audit log), a
// Role and a line scope. Principal.Allow is the single decision point every
// route and tool calls with the Action it is about to take and the line the
// resource belongs to, so the role table lives in one place (allowed below)
// and cannot drift between the API, MCP and the UI.
//
// The agent role is an engineer that can never approve or revoke a
// certificate, promote a model to production, freeze a scene or write to a
// machine (execute a certificate, set a channel): those are decisions a
// person signs. "The person who requested a certificate cannot approve it"
// is enforced by the store, with Principal.Name as the actor.
//
// Tokens are random 256-bit secrets shown once at creation and stored only
// as their sha256 (table api_tokens, migration 0007): a copy of the
// database does not give anyone a usable token. Because the secret has full
// entropy a plain hash is enough (no password stretching is needed), and
// lookup is by hash, so verification is one indexed read.
package auth
