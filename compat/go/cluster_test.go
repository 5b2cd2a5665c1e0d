package compat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

func TestClusterFailoverMySQL(t *testing.T) {
	t.Parallel()
	clusterFailover(t, "NACELLE_TEST_MYSQL_URL")
}

func TestClusterFailoverPostgres(t *testing.T) {
	t.Parallel()
	clusterFailover(t, "NACELLE_TEST_POSTGRES_URL")
}

// Two nodes on one database; the client is given both (as users configure it). The node it
// is connected to is killed; a change published on the other reaches its listener.
func clusterFailover(t *testing.T, dbEnv string) {
	db := NewTestDatabase(t, dbEnv)
	nodes := StartCluster(t, 2, ServerOpts{}, func(ports []int) []string {
		var members []string
		for _, p := range ports {
			members = append(members, fmt.Sprintf("127.0.0.1:%d", p))
		}
		return []string{"--db", db, "--members", strings.Join(members, ","),
			"--cluster-secret", "go-sdk-compat-cluster-secret"}
	})
	c := NewClient(t, nodes, ClientOpts{})
	// Apart per database: the SDK's query rate limiter is process-wide per key.
	id := "go-cluster-" + strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(dbEnv, "NACELLE_TEST_"), "_URL")) + ".yaml"
	nodes[0].Publish(id, group, "", "v0", nil)
	rec := NewRecorder(t, "listener")
	rec.Listen(c, id, group)
	rec.WaitFor(id, "v0", waitCB)

	// Which node holds the client's listen (exactly one, as the SDK uses one connection)?
	whichNode := func() (used, other *Server) {
		t.Helper()
		deadline := time.Now().Add(waitReg)
		for time.Now().Before(deadline) {
			for i, n := range nodes {
				if len(n.Listeners(id, group, "")) > 0 {
					return n, nodes[1-i]
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("neither node reports the client's listener")
		return nil, nil
	}
	used, other := whichNode()
	t.Logf("client connected to %s (port %d); the other is %s (port %d)", used.opts.Name, used.Port, other.opts.Name, other.Port)

	// A change on the node the client is not connected to reaches it through the cluster.
	pace()
	start := time.Now()
	other.Publish(id, group, "", "v1 via the other node", nil)
	e := rec.WaitFor(id, "v1 via the other node", waitCB)
	recordDelay(t, "cluster/publish-on-other-node", e.At.Sub(start))
	pace() // a change right after a callback can be lost by the SDK (config_test.go, TestPublicNamespaceName)
	mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: "v2 via SDK"})
	rec.WaitFor(id, "v2 via SDK", waitCB)
	if got, _, _ := other.Get(id, group, ""); got != "v2 via SDK" {
		// the cluster bound is 2 s; allow it
		deadline := time.Now().Add(5 * time.Second)
		for got != "v2 via SDK" && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			got, _, _ = other.Get(id, group, "")
		}
		if got != "v2 via SDK" {
			t.Fatalf("the other node serves %q after an SDK publish", got)
		}
	}

	// Take the client's node away — first a graceful stop (SIGTERM: Nacelle stops accepting
	// and ends the streams, as Java Nacos does), then, after it is back, a kill of the node
	// the client then uses — and publish on the survivor each time.
	for round, how := range []string{"SIGTERM", "SIGKILL"} {
		if round > 0 {
			used, other = whichNode()
			t.Logf("round %d: client on %s", round+1, used.opts.Name)
		}
		if how == "SIGTERM" {
			used.Stop()
		} else {
			used.Kill()
		}
		gone := time.Now()
		want := fmt.Sprintf("v%d after %s of %s", 3+round, how, used.opts.Name)
		other.Publish(id, group, "", want, nil)
		e = rec.WaitFor(id, want, waitCB)
		t.Logf("%s: listener got the change %v after the node went (reconnect included)", how, e.At.Sub(gone))
		other.WaitListening(id, group, "", waitReg)
		if got := mustGet(t, c, id, group); got != want {
			t.Fatalf("GetConfig after failover (%s): %q", how, got)
		}
		viaSDK := want + " (SDK)"
		mustPublish(t, c, vo.ConfigParam{DataId: id, Group: group, Content: viaSDK})
		rec.WaitFor(id, viaSDK, waitCB)
		pace()
		start = time.Now()
		latest := want + " (after)"
		other.Publish(id, group, "", latest, nil)
		e = rec.WaitFor(id, latest, waitCB)
		recordDelay(t, "cluster/after-failover", e.At.Sub(start))

		// The node comes back and serves what was written while it was down.
		used.Restart()
		if got, _, _ := used.Get(id, group, ""); got != latest {
			t.Fatalf("restarted node serves %q, want %q", got, latest)
		}
	}
}
