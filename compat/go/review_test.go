package compat

// Nacelle's review policies and change requests (docs/http-api.md) with the SDK: a policy
// on a group refuses the SDK's direct writes with the server's message; a change request
// opened by one user, approved by another and published reaches the SDK's listener.

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// TestReviewPolicy: auth on; alice writes (rw), bob also reviews (rwa); a policy of one
// approval on group REVIEWED.
func TestReviewPolicy(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{Auth: true})
	const reviewed, id = "REVIEWED", "go-reviewed.yaml"
	for _, u := range []struct{ name, password, role, action string }{
		{"alice", "Alice-Pass-123", "authors", "rw"},
		{"bob", "Bob-Pass-456", "reviewers", "rwa"},
	} {
		for _, call := range []struct {
			path string
			form url.Values
		}{
			{"/v1/auth/users", url.Values{"username": {u.name}, "password": {u.password}}},
			{"/v1/auth/roles", url.Values{"role": {u.role}, "username": {u.name}}},
			{"/v1/auth/permissions", url.Values{"role": {u.role}, "resource": {"*:*:*"}, "action": {u.action}}},
		} {
			if code, body, _ := srv.Do(http.MethodPost, call.path, call.form, nil); code != 200 {
				t.Fatalf("%s %v: %d %s", call.path, call.form, code, body)
			}
		}
	}
	// The key exists before the policy.
	srv.Publish(id, reviewed, "", "limit: 1", nil)
	if code, body, _ := srv.Do(http.MethodPost, "/nacelle/v1/review-policies",
		url.Values{"groupPattern": {reviewed}, "requiredApprovals": {"1"}}, nil); code != 200 {
		t.Fatalf("setting the policy: %d %s", code, body)
	}

	alice := NewClient(t, []*Server{srv}, ClientOpts{Username: "alice", Password: "Alice-Pass-123"})
	rec := NewRecorder(t, "alice's listener")
	rec.Listen(alice, id, reviewed)
	rec.WaitFor(id, "limit: 1", waitCB)
	srv.WaitListening(id, reviewed, "", waitReg)

	// Direct writes: refused (gRPC errorCode 403); the SDK returns false and the server's
	// message as its error.
	ok, err := alice.PublishConfig(vo.ConfigParam{DataId: id, Group: reviewed, Content: "limit: 9"})
	t.Logf("direct PublishConfig: ok=%v err=%v", ok, err)
	if ok || err == nil || !strings.Contains(err.Error(), "review policy") || !strings.Contains(err.Error(), "change request") {
		t.Fatalf("direct PublishConfig under a review policy: ok=%v err=%v", ok, err)
	}
	ok, err = alice.DeleteConfig(vo.ConfigParam{DataId: id, Group: reviewed})
	t.Logf("direct DeleteConfig: ok=%v err=%v", ok, err)
	if ok || err == nil || !strings.Contains(err.Error(), "review policy") {
		t.Fatalf("direct DeleteConfig under a review policy: ok=%v err=%v", ok, err)
	}
	ok, err = alice.PublishConfig(vo.ConfigParam{DataId: id + ".new", Group: reviewed, Content: "new: 1"})
	if ok || err == nil || !strings.Contains(err.Error(), "review policy") {
		t.Fatalf("a new key of the group is covered too: ok=%v err=%v", ok, err)
	}
	if got, found, _ := srv.Get(id, reviewed, ""); !found || got != "limit: 1" {
		t.Fatalf("after the refused writes the key holds %q (found %v)", got, found)
	}
	if _, found, _ := srv.Get(id+".new", reviewed, ""); found {
		t.Fatalf("a refused publish created %s", id+".new")
	}
	mustPublish(t, alice, vo.ConfigParam{DataId: id, Group: "OPEN", Content: "free: 1"}) // no policy there

	// The change request: alice opens it, bob approves, alice publishes.
	aliceTok, bobTok := srv.Login("alice", "Alice-Pass-123"), srv.Login("bob", "Bob-Pass-456")
	body, _ := json.Marshal(map[string]any{
		"title": "raise the limit",
		"items": []map[string]any{{"group": reviewed, "dataId": id, "content": "limit: 2"}},
	})
	code, answer, _ := srv.DoAs(aliceTok, http.MethodPost, "/nacelle/v1/changes", nil, string(body), nil)
	var created struct {
		Code int `json:"code"`
		Data struct {
			ID int64 `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(answer), &created); code != 200 || err != nil || created.Code != 0 {
		t.Fatalf("creating the change request: %d %s (%v)", code, answer, err)
	}
	cr := url.Values{"id": {strconv.FormatInt(created.Data.ID, 10)}}
	step := func(tok, action string, want int) string {
		t.Helper()
		code, answer, _ := srv.DoAs(tok, http.MethodPost, "/nacelle/v1/change/"+action, cr, "", nil)
		if code != want {
			t.Fatalf("change %s: %d %s, want %d", action, code, answer, want)
		}
		return answer
	}
	step(aliceTok, "publish", 409) // not before its approval
	step(aliceTok, "approve", 403) // never by its author
	if a := step(bobTok, "approve", 200); !strings.Contains(a, `"state":"approved"`) {
		t.Fatalf("approved: %s", a)
	}
	pace() // a change right after a callback can be lost by the SDK (README)
	if a := step(aliceTok, "publish", 200); !strings.Contains(a, `"state":"published"`) {
		t.Fatalf("published: %s", a)
	}
	rec.WaitFor(id, "limit: 2", waitCB)
	if got := mustGet(t, alice, id, reviewed); got != "limit: 2" {
		t.Fatalf("GetConfig after the change request: %q", got)
	}
}
