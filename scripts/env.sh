# Sourced by the scripts: a PATH with Go, and the module settings the
# project needs (go-dpdk v0.0.8 is not in the checksum database; go.sum
# carries its hash).
export PATH="$PATH:/usr/local/go/bin"
export GONOSUMDB="${GONOSUMDB:+$GONOSUMDB,}github.com/yerden/go-dpdk"
export GOFLAGS="${GOFLAGS:-} -mod=readonly"
