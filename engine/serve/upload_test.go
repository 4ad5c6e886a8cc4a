package serve

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"agentrl/engine/remote/wire"
	"agentrl/engine/rollout"
)

// TestUploadWeights: PUT /upload_weights/VERSION/NAME stores the body as the version's file
// under the upload folder and names that folder; a name with a separator, a leading dot or
// nothing, a missing key, another method or a server that cannot reload are refused and store
// nothing; a reload from one version's folder removes the others; Close removes a private
// upload folder.
func TestUploadWeights(t *testing.T) {
	var reloaded []string
	reload := func(dir string) error { reloaded = append(reloaded, dir); return nil }
	root := t.TempDir()
	s, base := newServer(t, rollout.Config{Slots: 1, MaxLen: 64}, Options{APIKey: "sesame", Reload: reload, UploadDir: root})
	base = strings.TrimSuffix(base, "/v1") // the engine endpoints are at the root
	for _, tc := range []struct {
		name, method, path, key string
		status                  int
	}{
		{"stored", http.MethodPut, "/upload_weights/v1/model.safetensors", "sesame", http.StatusOK},
		{"second file", http.MethodPut, "/upload_weights/v1/config.json", "sesame", http.StatusOK},
		{"no key", http.MethodPut, "/upload_weights/v1/x.json", "", http.StatusUnauthorized},
		{"POST", http.MethodPost, "/upload_weights/v1/x.json", "sesame", http.StatusMethodNotAllowed},
		{"parent folder", http.MethodPut, "/upload_weights/v1/../../x.json", "sesame", http.StatusBadRequest},
		{"escaped parent folder", http.MethodPut, "/upload_weights/v1/..%2Fx.json", "sesame", http.StatusBadRequest},
		{"hidden file", http.MethodPut, "/upload_weights/v1/.x", "sesame", http.StatusBadRequest},
		{"nested", http.MethodPut, "/upload_weights/v1/a/b", "sesame", http.StatusBadRequest},
		{"no name", http.MethodPut, "/upload_weights/v1", "sesame", http.StatusBadRequest},
		{"dot version", http.MethodPut, "/upload_weights/../x.json", "sesame", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, tc.method, base+tc.path, tc.key, "weights of "+tc.path)
			if status != tc.status {
				t.Fatalf("%s %s: %d %s; want %d", tc.method, tc.path, status, body, tc.status)
			}
			if status != http.StatusOK {
				return
			}
			var r wire.UploadWeightsResponse
			if err := json.Unmarshal(body, &r); err != nil || r.ModelPath != filepath.Join(root, "v1") || r.Bytes != int64(len("weights of "+tc.path)) {
				t.Fatalf("reply %s (%v); want model_path %s and the body's length", body, err, filepath.Join(root, "v1"))
			}
			got, err := os.ReadFile(filepath.Join(r.ModelPath, filepath.Base(tc.path)))
			if err != nil || string(got) != "weights of "+tc.path {
				t.Errorf("stored %q (%v)", got, err)
			}
		})
	}
	var names []string
	_ = filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error {
		names = append(names, strings.TrimPrefix(p, root))
		return nil
	})
	if strings.Join(names, " ") != " /v1 /v1/config.json /v1/model.safetensors" {
		t.Fatalf("the upload folder holds %q; want v1's two files only", names)
	}
	// A second version, then a reload from it: v1 goes.
	if status, body := call(t, http.MethodPut, base+"/upload_weights/v2/model.safetensors", "sesame", "v2"); status != http.StatusOK {
		t.Fatalf("v2: %d %s", status, body)
	}
	status, body := call(t, http.MethodPost, base+"/update_weights_from_disk", "sesame", map[string]any{"model_path": filepath.Join(root, "v2"), "weight_version": "v2"})
	if status != http.StatusOK || len(reloaded) != 1 || reloaded[0] != filepath.Join(root, "v2") {
		t.Fatalf("reload: %d %s, reloaded %v", status, body, reloaded)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 1 || entries[0].Name() != "v2" {
		t.Errorf("after the reload from v2 the upload folder holds %v; want v2 alone", entries)
	}
	s.Close()
	if _, err := os.Stat(filepath.Join(root, "v2")); err != nil {
		t.Errorf("Close removed a folder the user named (UploadDir): %v", err)
	}

	// A private folder goes with the server; a server that cannot reload takes no uploads.
	p, pbase := newServer(t, rollout.Config{Slots: 1, MaxLen: 64}, Options{Reload: reload})
	pbase = strings.TrimSuffix(pbase, "/v1")
	status, body = call(t, http.MethodPut, pbase+"/upload_weights/v1/model.safetensors", "", "w")
	var r wire.UploadWeightsResponse
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil {
		t.Fatalf("private folder: %d %s", status, body)
	}
	p.Close()
	if _, err := os.Stat(filepath.Dir(r.ModelPath)); !os.IsNotExist(err) {
		t.Errorf("Close left the private upload folder %s (%v)", filepath.Dir(r.ModelPath), err)
	}
	_, nbase := newServer(t, rollout.Config{Slots: 1, MaxLen: 64}, Options{})
	nbase = strings.TrimSuffix(nbase, "/v1")
	if status, body := call(t, http.MethodPut, nbase+"/upload_weights/v1/model.safetensors", "", "w"); status != http.StatusBadRequest || !strings.Contains(string(body), "cannot reload") {
		t.Errorf("a server without Reload: %d %s; want 400 naming why", status, body)
	}
}
