package compat

// The real Go SDK client, configured as a user would (default gRPC port derivation:
// HTTP port + 1000), but quiet (log and cache dirs in temp dirs) and fast.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

type ClientOpts struct {
	Namespace string
	Username  string
	Password  string
	AppName   string
}

func NewClient(t testing.TB, servers []*Server, o ClientOpts) config_client.IConfigClient {
	t.Helper()
	var scs []constant.ServerConfig
	for _, s := range servers {
		// GrpcPort left 0: the SDK derives it as Port + 1000, as it does for users.
		scs = append(scs, constant.ServerConfig{IpAddr: "127.0.0.1", Port: uint64(s.Port)})
	}
	cc := constant.ClientConfig{
		NamespaceId:         o.Namespace,
		TimeoutMs:           5000,
		AppName:             o.AppName,
		Username:            o.Username,
		Password:            o.Password,
		NotLoadCacheAtStart: true,
		DisableUseSnapShot:  true, // a failing server must show, not be papered over by the snapshot
		CacheDir:            t.TempDir(),
		LogDir:              sdkLogDir,
		LogLevel:            "info",
	}
	c, err := clients.NewConfigClient(vo.NacosClientParam{ClientConfig: &cc, ServerConfigs: scs})
	if err != nil {
		t.Fatalf("NewConfigClient: %v", err)
	}
	t.Cleanup(c.CloseClient)
	return c
}

// ---- listener recorder ----

type Event struct {
	Namespace, Group, DataID, Content string
	At                                time.Time
}

type Recorder struct {
	t    testing.TB
	name string
	ch   chan Event
	seen []Event
}

func NewRecorder(t testing.TB, name string) *Recorder {
	return &Recorder{t: t, name: name, ch: make(chan Event, 1024)}
}

func (r *Recorder) OnChange(namespace, group, dataID, data string) {
	r.ch <- Event{namespace, group, dataID, data, time.Now()}
}

// Listen registers the recorder with the SDK's ListenConfig.
func (r *Recorder) Listen(c config_client.IConfigClient, dataID, group string) {
	r.t.Helper()
	if err := c.ListenConfig(vo.ConfigParam{DataId: dataID, Group: group, OnChange: r.OnChange}); err != nil {
		r.t.Fatalf("ListenConfig %s/%s: %v", group, dataID, err)
	}
}

func short(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q… (%d bytes)", s[:60], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// WaitFor waits (bounded) for a callback of dataID with exactly want; callbacks of other
// contents seen meanwhile are kept in r.seen.
func (r *Recorder) WaitFor(dataID, want string, within time.Duration) Event {
	r.t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case e := <-r.ch:
			r.seen = append(r.seen, e)
			if e.DataID == dataID && e.Content == want {
				return e
			}
		case <-timer.C:
			var got []string
			for _, e := range r.seen {
				if e.DataID == dataID {
					got = append(got, short(e.Content))
				}
			}
			r.t.Fatalf("%s: no callback of %q with content %s within %v; callbacks of that key so far: [%s]",
				r.name, dataID, short(want), within, strings.Join(got, ", "))
			return Event{}
		}
	}
}

// Drain moves callbacks already delivered into r.seen without waiting.
func (r *Recorder) Drain() {
	for {
		select {
		case e := <-r.ch:
			r.seen = append(r.seen, e)
		default:
			return
		}
	}
}

// Saw reports whether a callback of dataID with content was ever delivered.
func (r *Recorder) Saw(dataID, content string) bool {
	r.Drain()
	for _, e := range r.seen {
		if e.DataID == dataID && e.Content == content {
			return true
		}
	}
	return false
}

func mustPublish(t testing.TB, c config_client.IConfigClient, p vo.ConfigParam) {
	t.Helper()
	ok, err := c.PublishConfig(p)
	if err != nil || !ok {
		t.Fatalf("SDK PublishConfig %s/%s: ok=%v err=%v", p.Group, p.DataId, ok, err)
	}
}

func mustGet(t testing.TB, c config_client.IConfigClient, dataID, group string) string {
	t.Helper()
	s, err := c.GetConfig(vo.ConfigParam{DataId: dataID, Group: group})
	if err != nil {
		t.Fatalf("SDK GetConfig %s/%s: %v", group, dataID, err)
	}
	return s
}
