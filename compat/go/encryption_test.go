package compat

// What the Go SDK v2.3.2 supports around encryption and fuzzy watch:
//   - encryption: only a KMS filter (OpenKMS, Alibaba Cloud KMS; dataIds containing
//     "cipher-kms-aes-128-", "cipher-kms-aes-256-" or "cipher-"). There is no AES plugin
//     (Nacos's nacos-aes-encryption-plugin): with OpenKMS off (the default) a
//     `cipher-aes-…` config reaches the application as the server sends it over gRPC —
//     the plugin's ciphertext — and the SDK gives no access to `encryptedDataKey`.
//     OpenKMS needs an Alibaba Cloud KMS endpoint and cannot run here.
//   - fuzzy watch (Nacos 3.0 `ConfigFuzzyWatchRequest`): not in the SDK (no such API).
// The test pins down what a Go user observes against Nacelle, which matches Nacos 3.0.

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// decryptPlugin is Nacos's AES plugin decryption (docs/encryption.md), written here
// because the Go SDK has none.
func decryptPlugin(t *testing.T, dataKey, hexCipher string) string {
	t.Helper()
	keyHex, err := base64.StdEncoding.DecodeString(dataKey)
	if err != nil {
		t.Fatalf("data key %q is not base64: %v", dataKey, err)
	}
	key, err := hex.DecodeString(string(keyHex))
	if err != nil || len(keyHex) < 16 {
		t.Fatalf("data key %q is not base64 of hex: %v", dataKey, err)
	}
	ct, err := hex.DecodeString(hexCipher)
	if err != nil || len(ct)%aes.BlockSize != 0 || len(ct) == 0 {
		t.Fatalf("content %q is not the plugin's hex ciphertext: %v", short(hexCipher), err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	pt := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, keyHex[:16]).CryptBlocks(pt, ct)
	pad := int(pt[len(pt)-1])
	if pad < 1 || pad > aes.BlockSize {
		t.Fatalf("bad padding")
	}
	return string(pt[:len(pt)-pad])
}

func TestEncryptedConfigWithoutAESPlugin(t *testing.T) {
	t.Parallel()
	srv := StartServer(t, ServerOpts{})
	c := NewClient(t, []*Server{srv}, ClientOpts{})
	const plain = "password: s3cret-密码-🔑"

	// Published over HTTP: the server encrypts (Nacos's plugin behaviour).
	srv.Publish("cipher-aes-go-http.yml", group, "", plain, nil)
	got, found, hdr := srv.Get("cipher-aes-go-http.yml", group, "")
	dataKey := hdr.Get("Encrypted-Data-Key")
	if !found || got != plain || dataKey == "" {
		t.Fatalf("HTTP GET of an encrypted config: %q, Encrypted-Data-Key %q", got, dataKey)
	}
	// The Go SDK (gRPC) gets the ciphertext, as from Nacos, and cannot decrypt it.
	sdkGot := mustGet(t, c, "cipher-aes-go-http.yml", group)
	if sdkGot == plain {
		t.Fatalf("the SDK got the plaintext over gRPC; Nacos sends the ciphertext")
	}
	if dec := decryptPlugin(t, dataKey, sdkGot); dec != plain {
		t.Fatalf("the SDK's content decrypts to %q", dec)
	}
	if hdr.Get("Content-MD5") != md5hex(sdkGot) {
		t.Fatalf("Content-MD5 %s is not the md5 of the stored ciphertext", hdr.Get("Content-MD5"))
	}
	// Its listener gets the same ciphertext, and is called once per change (no loop on md5).
	// (A fresh client: one that read the key starts its listener from that content.)
	lc := NewClient(t, []*Server{srv}, ClientOpts{})
	rec := NewRecorder(t, "listener")
	rec.Listen(lc, "cipher-aes-go-http.yml", group)
	rec.WaitFor("cipher-aes-go-http.yml", sdkGot, waitCB)
	pace() // a change right after a callback can be lost by the SDK (see TestPublicNamespaceName)
	srv.Publish("cipher-aes-go-http.yml", group, "", plain+" v2", nil)
	ct2 := mustGet(t, c, "cipher-aes-go-http.yml", group)
	rec.WaitFor("cipher-aes-go-http.yml", ct2, waitCB)
	_, _, hdr2 := srv.Get("cipher-aes-go-http.yml", group, "")
	if dec := decryptPlugin(t, hdr2.Get("Encrypted-Data-Key"), ct2); dec != plain+" v2" {
		t.Fatalf("listener content decrypts to %q", dec)
	}

	// Published by the SDK (gRPC, no encryptedDataKey): Nacelle encrypts at rest as Nacos
	// 3.0 does; HTTP reads decrypt, the SDK reads the ciphertext back.
	mustPublish(t, c, vo.ConfigParam{DataId: "cipher-aes-go-sdk.yml", Group: group, Content: plain})
	got, _, hdr = srv.Get("cipher-aes-go-sdk.yml", group, "")
	if got != plain || hdr.Get("Encrypted-Data-Key") == "" {
		t.Fatalf("HTTP GET of an SDK-published cipher config: %q key %q", got, hdr.Get("Encrypted-Data-Key"))
	}
	sdkGot = mustGet(t, c, "cipher-aes-go-sdk.yml", group)
	if dec := decryptPlugin(t, hdr.Get("Encrypted-Data-Key"), sdkGot); dec != plain {
		t.Fatalf("SDK read-back decrypts to %q", dec)
	}
	t.Logf("SDK publishes plaintext to cipher-aes-go-sdk.yml and reads back %d hex chars of ciphertext", len(sdkGot))
}
