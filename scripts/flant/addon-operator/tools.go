//go:build tools

// Package tools pins the command this module builds, so `go mod tidy` keeps it.
package tools

import _ "github.com/flant/addon-operator/cmd/addon-operator"
