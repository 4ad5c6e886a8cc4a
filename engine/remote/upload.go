package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"agentrl/engine/remote/wire"
)

// notUploadName is what a version label may not hold in the upload's folder name.
var notUploadName = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// upload sends every file of the weights folder dir to the server (PUT
// /upload_weights/VERSION/NAME, streamed from disk) and returns the server's own folder holding
// them, for update_weights_from_disk.
func (c *client) upload(ctx context.Context, dir, version string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("upload: the weights folder: %w", err)
	}
	folder := strings.TrimLeft(notUploadName.ReplaceAllString(version, "_"), "._-")
	if len(folder) > 128 {
		folder = folder[len(folder)-128:]
	}
	if folder == "" {
		folder = "weights"
	}
	var path string
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp") {
			continue
		}
		p, err := c.put(ctx, "/upload_weights/"+url.PathEscape(folder)+"/"+url.PathEscape(name), filepath.Join(dir, name))
		if err != nil {
			return "", fmt.Errorf("upload of %s: %w", name, err)
		}
		path = p
	}
	if path == "" {
		return "", fmt.Errorf("upload: the weights folder %s holds no files", dir)
	}
	return path, nil
}

// put streams the file at src as the body of PUT path and returns the model_path replied.
func (c *client) put(ctx context.Context, path, src string) (string, error) {
	f, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	req, err := c.request(ctx, http.MethodPut, path, f)
	if err != nil {
		return "", err
	}
	req.ContentLength = st.Size()
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", statusError(resp.StatusCode, data)
	}
	var r wire.UploadWeightsResponse
	if err := json.Unmarshal(data, &r); err != nil || r.ModelPath == "" {
		return "", fmt.Errorf("the reply %q names no model_path: is this an agentrl-tui serve engine?", short(string(data)))
	}
	if r.Bytes != st.Size() {
		return "", fmt.Errorf("the server stored %d of the file's %d bytes", r.Bytes, st.Size())
	}
	return r.ModelPath, nil
}
