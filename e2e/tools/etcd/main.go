// Command etcd is the etcd v3.5 server, built from its Go module for the loopback test cluster.
// It is the same wrapper as go.etcd.io/etcd/server/v3's own main package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
