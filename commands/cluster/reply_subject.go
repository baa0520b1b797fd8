package cluster

import (
	"strings"

	"github.com/nats-io/nats.go"
)

// answerable reports whether the writer may answer a forwarded request to reply, the subject the request named for
// its answer: an inbox, as every follower's request names (nats.go's request inboxes, under the writer's connection's
// custom prefix when it has one, as every crewd of a cluster does alike).
//
// NB: anyone who may publish on the commands subject names the subject, and the writer publishes its answer there
// with its own connection: to the stream's groups or events subject JetStream stored the answer in the stream,
// where no copy reads it (every crewd failed stop, for good: the stream refuses deletes), and to the lease's key
// ($KV.…) it overwrote the lease.
func (n *Node) answerable(reply string) bool {
	if strings.HasPrefix(reply, nats.InboxPrefix) {
		return len(reply) > len(nats.InboxPrefix)
	}
	custom := n.o.Conn.Opts.InboxPrefix
	return custom != "" && strings.HasPrefix(reply, custom+".") && len(reply) > len(custom)+1
}
