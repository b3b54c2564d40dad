// Wrapper module for building flant's addon-operator as the compatibility oracle
// (scripts/install-flant.sh). Replace directives only apply in the main module, so
// the release's own replaces are repeated here.
module shell-operator-rs/flant-addon-operator

go 1.26.4

require github.com/flant/addon-operator v1.24.4

replace github.com/go-openapi/swag => github.com/go-openapi/swag v0.21.1

replace github.com/docker/cli => github.com/docker/cli v28.2.2+incompatible
