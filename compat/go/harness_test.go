package compat

// The harness: real `nacelle serve` processes (binary from NACELLE_BIN) on random ports,
// a temp data dir each, stderr captured to a file whose tail is printed when a test fails.

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	nacelleBin string
	sdkLogDir  string // the SDK's logger is process-global: one directory for the run
)

func TestMain(m *testing.M) {
	nacelleBin = os.Getenv("NACELLE_BIN")
	if nacelleBin == "" {
		fmt.Fprintln(os.Stderr, "NACELLE_BIN is not set: point it at the nacelle binary, e.g.\n"+
			"  cd compat/go && NACELLE_BIN=/work/main/target/debug/nacelle go test -count=1 ./...")
		os.Exit(1)
	}
	if fi, err := os.Stat(nacelleBin); err != nil || fi.IsDir() {
		fmt.Fprintf(os.Stderr, "NACELLE_BIN=%s is not a file: %v\n", nacelleBin, err)
		os.Exit(1)
	}
	// GO_SDK_LOG_DIR keeps the SDK's log (with GO_SDK_LOG_LEVEL=debug: every request and
	// response); by default it goes to a temp dir removed after a passing run.
	dir, keep := os.Getenv("GO_SDK_LOG_DIR"), true
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "nacelle-go-sdk-log-"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		keep = false
	}
	sdkLogDir = dir
	code := m.Run()
	printDelaySummary()
	if code == 0 && !keep {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "Go SDK log kept in %s\n", dir)
	}
	os.Exit(code)
}

// ---- ports ----

var (
	portMu       sync.Mutex
	portReserved = map[int]bool{} // ports handed to a server of this process
)

func portFree(p int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// pickPort returns P in 20000-32000 whose P, P+1000 and P+1001 are free and not reserved
// by another server of this process (below the ephemeral range, so no outgoing connection
// takes them between the check and nacelle's bind; other processes may, hence the retry in
// start).
func pickPort(t testing.TB) int {
	portMu.Lock()
	defer portMu.Unlock()
	for i := 0; i < 1000; i++ {
		p := 20000 + rand.IntN(32000-1001-20000)
		ps := []int{p, p + 1, p - 1, p + 1000, p + 1001}
		ok := true
		for _, q := range ps {
			if portReserved[q] {
				ok = false
			}
		}
		if !ok || !portFree(p) || !portFree(p+1000) || !portFree(p+1001) {
			continue
		}
		// Reserve P's neighbours too: two nodes need HTTP ports at least 2 apart.
		for _, q := range ps {
			portReserved[q] = true
		}
		return p
	}
	t.Fatalf("no free port triple found in 20000-32000")
	return 0
}

// ---- servers ----

type ServerOpts struct {
	Auth      bool
	TLS       *TLSFiles // HTTPS and gRPC over TLS on the same ports (--tls-cert/--tls-key)
	ExtraArgs []string
	Env       []string
	Name      string // for logs; default "nacelle"
}

type Server struct {
	t        testing.TB
	opts     ServerOpts
	Port     int // HTTP; gRPC is Port+1000
	DataDir  string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	exitErr  error
	mu       sync.Mutex
	token    string
	password string
	http     *http.Client
}

func (s *Server) GrpcPort() int { return s.Port + 1000 }
func (s *Server) Addr() string  { return "127.0.0.1:" + strconv.Itoa(s.Port) }
func (s *Server) Base() string  { return s.scheme() + "://" + s.Addr() + "/nacos" }
func (s *Server) scheme() string {
	if s.opts.TLS != nil {
		return "https"
	}
	return "http"
}

func newServer(t testing.TB, opts ServerOpts) *Server {
	if opts.Name == "" {
		opts.Name = "nacelle"
	}
	s := &Server{t: t, opts: opts, DataDir: t.TempDir(), http: &http.Client{Timeout: 15 * time.Second}}
	if opts.TLS != nil {
		s.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: opts.TLS.Pool}}
	}
	// NACELLE_LOG_DIR keeps every server's stderr (named after the test); by default it
	// lives in the test's temp dir and its tail is printed when the test fails.
	if dir := os.Getenv("NACELLE_LOG_DIR"); dir != "" {
		s.logPath = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"."+opts.Name+".stderr")
	} else {
		s.logPath = filepath.Join(t.TempDir(), opts.Name+".stderr")
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			s.dumpLog()
		}
	})
	return s
}

// StartServer starts nacelle on fresh ports and waits until it is ready.
func StartServer(t testing.TB, opts ServerOpts) *Server {
	t.Helper()
	s := newServer(t, opts)
	for attempt := 1; ; attempt++ {
		s.Port = pickPort(t)
		err := s.launch()
		if err == nil {
			return s
		}
		if errors.Is(err, errAddrInUse) && attempt < 5 {
			t.Logf("%s: port %d taken (%v), retrying with fresh ports", opts.Name, s.Port, err)
			continue
		}
		t.Fatalf("%s: start on port %d: %v", opts.Name, s.Port, err)
	}
}

// ReserveServer picks the ports of a server without starting it (Launch starts it).
func ReserveServer(t testing.TB, opts ServerOpts) *Server {
	t.Helper()
	s := newServer(t, opts)
	s.Port = pickPort(t)
	return s
}

// Launch starts a reserved server on its ports (no retry: the ports were promised).
func (s *Server) Launch() {
	s.t.Helper()
	if err := s.launch(); err != nil {
		s.t.Fatalf("%s: start on port %d: %v", s.opts.Name, s.Port, err)
	}
}

// StartCluster starts n nodes that know each other (--members); args(ports) gives the
// extra arguments of every node. With a port taken, all nodes restart on fresh ports.
func StartCluster(t testing.TB, n int, opts ServerOpts, args func(ports []int) []string) []*Server {
	t.Helper()
	nodes := make([]*Server, n)
	for i := range nodes {
		o := opts
		o.Name = fmt.Sprintf("node%d", i+1)
		nodes[i] = newServer(t, o)
	}
	for attempt := 1; ; attempt++ {
		ports := make([]int, n)
		for i := range ports {
			ports[i] = pickPort(t)
		}
		extra := args(ports)
		var err error
		for i, s := range nodes {
			s.Port = ports[i]
			s.opts.ExtraArgs = append(append([]string(nil), opts.ExtraArgs...), extra...)
			if err = s.launch(); err != nil {
				break
			}
		}
		if err == nil {
			return nodes
		}
		for _, s := range nodes {
			s.Kill()
		}
		if errors.Is(err, errAddrInUse) && attempt < 5 {
			t.Logf("cluster: a port was taken (%v), retrying with fresh ports", err)
			continue
		}
		t.Fatalf("cluster: start: %v", err)
	}
}

var errAddrInUse = errors.New("Address already in use")

func (s *Server) args() []string {
	a := []string{"serve", "--bind", "127.0.0.1", "--port", strconv.Itoa(s.Port), "--data-dir", s.DataDir}
	if s.opts.Auth {
		a = append(a, "--auth", "on")
	} else {
		a = append(a, "--auth", "off")
	}
	if s.opts.TLS != nil {
		a = append(a, "--tls-cert", s.opts.TLS.CertFile, "--tls-key", s.opts.TLS.KeyFile)
	}
	return append(a, s.opts.ExtraArgs...)
}

// launch starts the process on s.Port and waits for readiness.
func (s *Server) launch() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(logf, "==== %s %s %s\n", time.Now().Format(time.RFC3339Nano), nacelleBin, strings.Join(s.args(), " "))
	cmd := exec.Command(nacelleBin, s.args()...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), s.opts.Env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.done, s.exitErr = cmd, done, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		logf.Close()
		s.mu.Lock()
		s.exitErr = err
		s.mu.Unlock()
		close(done)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			tail := s.logTail(20)
			if strings.Contains(tail, "Address already in use") || strings.Contains(tail, "address already in use") {
				return fmt.Errorf("%w: %s", errAddrInUse, lastLine(tail))
			}
			return fmt.Errorf("nacelle exited before ready (%v):\n%s", s.exitErr, tail)
		default:
		}
		resp, err := s.http.Get(s.Base() + "/v1/console/health/readiness")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Kill()
	return fmt.Errorf("not ready within 60 s:\n%s", s.logTail(20))
}

// Stop sends SIGTERM and waits for the exit (SIGKILL after 15 s).
func (s *Server) Stop() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.t.Logf("%s did not exit 15 s after SIGTERM; killing", s.opts.Name)
		cmd.Process.Kill()
		<-done
	}
}

// Kill sends SIGKILL (the process started by this harness, by PID) and waits.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	cmd.Process.Kill()
	<-done
}

// Restart starts the server again on the same ports and data dir.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	s.token = ""
	s.mu.Unlock()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.launch(); err == nil {
			return
		}
		if !errors.Is(err, errAddrInUse) {
			break
		}
		time.Sleep(250 * time.Millisecond) // our own old sockets may linger briefly
	}
	s.t.Fatalf("%s: restart on port %d: %v", s.opts.Name, s.Port, err)
}

func (s *Server) logTail(n int) string {
	b, err := os.ReadFile(s.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}

func (s *Server) dumpLog() {
	s.t.Logf("---- tail of %s stderr (%s, port %d) ----\n%s\n---- end ----", s.opts.Name, s.logPath, s.Port, s.logTail(60))
}

// AdminPassword is the password the first start wrote to <data-dir>/initial-admin-password.
func (s *Server) AdminPassword() string {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.password == "" {
		b, err := os.ReadFile(filepath.Join(s.DataDir, "initial-admin-password"))
		if err != nil {
			s.t.Fatalf("reading the initial admin password: %v", err)
		}
		s.password = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	return s.password
}

func (s *Server) accessToken() string {
	s.t.Helper()
	if !s.opts.Auth {
		return ""
	}
	pw := s.AdminPassword()
	s.mu.Lock()
	tok := s.token
	s.mu.Unlock()
	if tok != "" {
		return tok
	}
	tok = s.Login("nacos", pw)
	s.mu.Lock()
	s.token = tok
	s.mu.Unlock()
	return tok
}

// Login logs in as username (POST /v1/auth/login) and returns its access token.
func (s *Server) Login(username, password string) string {
	s.t.Helper()
	resp, err := s.http.PostForm(s.Base()+"/v1/auth/login", url.Values{"username": {username}, "password": {password}})
	if err != nil {
		s.t.Fatalf("login of %s: %v", username, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		s.t.Fatalf("login of %s: %d %s", username, resp.StatusCode, body)
	}
	var r struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.AccessToken == "" {
		s.t.Fatalf("login of %s: bad body %s (%v)", username, body, err)
	}
	return r.AccessToken
}

// Do sends an HTTP request to the server (path under /nacos), authenticated as the admin
// when auth is on; returns status, body and headers.
func (s *Server) Do(method, path string, form url.Values, hdr map[string]string) (int, string, http.Header) {
	s.t.Helper()
	return s.DoAs(s.accessToken(), method, path, form, "", hdr)
}

// DoAs sends an HTTP request with the access token tok (none when empty): form as the query
// of a GET or DELETE, else as the body, or jsonBody as a JSON body (form then in the query).
func (s *Server) DoAs(tok, method, path string, form url.Values, jsonBody string, hdr map[string]string) (int, string, http.Header) {
	s.t.Helper()
	var body io.Reader
	u := s.Base() + path
	contentType := ""
	if method == http.MethodGet || method == http.MethodDelete || jsonBody != "" {
		if len(form) > 0 {
			u += "?" + form.Encode()
		}
		if jsonBody != "" {
			body, contentType = strings.NewReader(jsonBody), "application/json"
		}
	} else {
		body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func keyForm(dataID, group, tenant string) url.Values {
	v := url.Values{"dataId": {dataID}, "group": {group}}
	if tenant != "" {
		v.Set("tenant", tenant)
	}
	return v
}

// Publish publishes over HTTP v1; hdr may carry betaIps.
func (s *Server) Publish(dataID, group, tenant, content string, hdr map[string]string) {
	s.t.Helper()
	f := keyForm(dataID, group, tenant)
	f.Set("content", content)
	code, body, _ := s.Do(http.MethodPost, "/v1/cs/configs", f, hdr)
	if code != 200 || body != "true" {
		s.t.Fatalf("HTTP publish %s/%s/%q: %d %s", tenant, group, dataID, code, body)
	}
}

// Get reads over HTTP v1; found=false on 404.
func (s *Server) Get(dataID, group, tenant string) (content string, found bool, hdr http.Header) {
	s.t.Helper()
	code, body, h := s.Do(http.MethodGet, "/v1/cs/configs", keyForm(dataID, group, tenant), nil)
	switch code {
	case 200:
		return body, true, h
	case 404:
		return "", false, h
	}
	s.t.Fatalf("HTTP get %s/%s/%q: %d %s", tenant, group, dataID, code, body)
	return
}

func (s *Server) Delete(dataID, group, tenant string) {
	s.t.Helper()
	code, body, _ := s.Do(http.MethodDelete, "/v1/cs/configs", keyForm(dataID, group, tenant), nil)
	if code != 200 || body != "true" {
		s.t.Fatalf("HTTP delete %s/%s/%q: %d %s", tenant, group, dataID, code, body)
	}
}

func (s *Server) CreateNamespace(id, name string) {
	s.t.Helper()
	code, body, _ := s.Do(http.MethodPost, "/v1/console/namespaces",
		url.Values{"customNamespaceId": {id}, "namespaceName": {name}, "namespaceDesc": {"go sdk compat"}}, nil)
	if code != 200 || body != "true" {
		s.t.Fatalf("create namespace %s: %d %s", id, code, body)
	}
}

// Listeners returns the server's listener query for a key: {ip: md5}.
func (s *Server) Listeners(dataID, group, tenant string) map[string]string {
	s.t.Helper()
	code, body, _ := s.Do(http.MethodGet, "/v1/cs/configs/listener", keyForm(dataID, group, tenant), nil)
	if code != 200 {
		s.t.Fatalf("listener query: %d %s", code, body)
	}
	var r struct {
		Status map[string]string `json:"lisentersGroupkeyStatus"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		s.t.Fatalf("listener query body %s: %v", body, err)
	}
	return r.Status
}

// WaitListening waits until the server reports a listener of the key.
func (s *Server) WaitListening(dataID, group, tenant string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if len(s.Listeners(dataID, group, tenant)) > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("no listener of %s/%s/%q registered at %s within %v", tenant, group, dataID, s.Addr(), within)
}

// metricsText is the Prometheus text at /metrics.
func (s *Server) metricsText() string {
	s.t.Helper()
	resp, err := s.http.Get(s.scheme() + "://" + s.Addr() + "/metrics")
	if err != nil {
		s.t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		s.t.Fatalf("GET /metrics: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// Metric is the sum of the samples of metric name (as /metrics spells it, `_total`
// included) whose labels include every one of labels, each written as in the text
// (`code="403"`).
func (s *Server) Metric(name string, labels ...string) float64 {
	s.t.Helper()
	sum := 0.0
	for _, line := range strings.Split(s.metricsText(), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		i := strings.LastIndexByte(rest, ' ')
		set := rest[:i]
		matches := true
		for _, l := range labels {
			if !strings.Contains(set, "{"+l) && !strings.Contains(set, ","+l) {
				matches = false
				break
			}
		}
		if v, err := strconv.ParseFloat(rest[i+1:], 64); matches && err == nil {
			sum += v
		}
	}
	return sum
}

// Metrics reads the Prometheus text at /metrics: each sample's value summed by metric name
// (labels dropped).
func (s *Server) Metrics() map[string]float64 {
	s.t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(s.metricsText(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			name = name[:j]
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[name] += v
		}
	}
	return out
}

// TLSFiles is a test CA and a server certificate for 127.0.0.1 signed by it, as PEM files.
type TLSFiles struct {
	CAFile, CertFile, KeyFile string
	Pool                      *x509.CertPool
}

func NewTLSFiles(t testing.TB) *TLSFiles {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nacelle go compat CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(crand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), Pool: x509.NewCertPool()}
	write := func(path, typ string, b []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(f.CAFile, "CERTIFICATE", caDER)
	write(f.CertFile, "CERTIFICATE", der)
	write(f.KeyFile, "PRIVATE KEY", keyDER)
	f.Pool.AddCert(ca)
	return f
}

// ---- databases (cluster tests) ----

// NewTestDatabase creates a uniquely named database on the server of env var envVar
// (a URL without a database) and drops it when the test ends; returns the URL with it.
func NewTestDatabase(t testing.TB, envVar string) string {
	t.Helper()
	base := os.Getenv(envVar)
	if base == "" || base == "skip" {
		t.Fatalf("%s is not set: this test needs a database server. Start the throwaway servers with\n"+
			"  eval \"$(bash scripts/test-databases.sh start)\"   (from the repository root)\n"+
			"which exports NACELLE_TEST_MYSQL_URL and NACELLE_TEST_POSTGRES_URL; stop them with\n"+
			"  bash scripts/test-databases.sh stop \"$NACELLE_TEST_DB_DIR\"", envVar)
	}
	base = strings.TrimRight(base, "/")
	name := fmt.Sprintf("nacelle_go_%d_%d", time.Now().UnixNano()%1e12, rand.IntN(1e6))
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s=%s: %v", envVar, base, err)
	}
	var create, drop func() error
	switch u.Scheme {
	case "mysql", "mariadb":
		args := []string{"--no-defaults", "-h", u.Hostname(), "-P", u.Port(), "-u", u.User.Username()}
		if pw, ok := u.User.Password(); ok {
			args = append(args, "-p"+pw)
		}
		run := func(sql string) error {
			out, err := exec.Command("mysql", append(args, "-e", sql)...).CombinedOutput()
			if err != nil {
				return fmt.Errorf("mysql %q: %v: %s", sql, err, out)
			}
			return nil
		}
		create = func() error {
			return run("CREATE DATABASE " + name + " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		}
		drop = func() error { return run("DROP DATABASE IF EXISTS " + name) }
	case "postgres", "postgresql":
		admin := *u
		admin.Path = "/postgres"
		run := func(sql string) error {
			out, err := exec.Command("psql", admin.String(), "-v", "ON_ERROR_STOP=1", "-q", "-c", sql).CombinedOutput()
			if err != nil {
				return fmt.Errorf("psql %q: %v: %s", sql, err, out)
			}
			return nil
		}
		create = func() error { return run("CREATE DATABASE " + name) }
		drop = func() error { return run("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") }
	default:
		t.Fatalf("%s=%s: unknown scheme %q", envVar, base, u.Scheme)
	}
	if err := create(); err != nil {
		t.Fatalf("creating test database: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Logf("dropping test database %s: %v", name, err)
		}
	})
	return base + "/" + name
}

// ---- publish→callback delays ----

var (
	delayMu sync.Mutex
	delays  = map[string][]time.Duration{}
)

func recordDelay(t testing.TB, scenario string, d time.Duration) {
	t.Logf("publish→callback delay (%s): %.1f ms", scenario, float64(d.Microseconds())/1000)
	delayMu.Lock()
	delays[scenario] = append(delays[scenario], d)
	delayMu.Unlock()
}

func printDelaySummary() {
	delayMu.Lock()
	defer delayMu.Unlock()
	if len(delays) == 0 {
		return
	}
	var all []time.Duration
	var names []string
	for k, v := range delays {
		names = append(names, k)
		all = append(all, v...)
	}
	sort.Strings(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "SUMMARY publish→callback delays (Go SDK over gRPC): %s\n", stats(all))
	for _, n := range names {
		fmt.Fprintf(&b, "  %-28s %s\n", n, stats(delays[n]))
	}
	fmt.Print(b.String())
}

func stats(ds []time.Duration) string {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return fmt.Sprintf("n=%d min=%.1f ms median=%.1f ms max=%.1f ms", len(s), ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
}
