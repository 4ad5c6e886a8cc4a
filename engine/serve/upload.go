package serve

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"agentrl/engine/remote/wire"
)

// Weight uploads: a trainer whose engines share no filesystem with it (rollout.remote.push:
// http) sends the policy's files over HTTP, one PUT /upload_weights/VERSION/NAME each, then
// loads them with update_weights_from_disk at the folder the reply names. Each version has a
// folder of its own under the upload root, and a reload from one removes the others, so the
// disk holds at most the weights served and the ones arriving. Only this project's serve takes
// uploads: SGLang's update_weights_from_tensor takes pickled torch tensors, vLLM has no such route.

// uploadName is a version folder's or a file's name: no separators, no leading dot.
var uploadName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// maxUpload bounds one uploaded file (a shard; the trainer writes 4 GiB ones).
const maxUpload = 64 << 30

// uploadRoot is the folder uploads go under: Options.UploadDir, else a private temporary folder
// made on the first upload and removed by Close.
func (s *Server) uploadRoot() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uploads != "" {
		return s.uploads, nil
	}
	if s.o.UploadDir != "" {
		if err := os.MkdirAll(s.o.UploadDir, 0o700); err != nil {
			return "", err
		}
		s.uploads = s.o.UploadDir
		return s.uploads, nil
	}
	dir, err := os.MkdirTemp("", "agentrl-serve-weights-")
	if err != nil {
		return "", err
	}
	s.uploads, s.ownUploads = dir, true
	return dir, nil
}

// upload answers PUT /upload_weights/VERSION/NAME: the body stored as the version's file NAME
// (written aside, then renamed, so a reload never reads half a file).
func (s *Server) upload(w http.ResponseWriter, r *http.Request) {
	if s.o.Reload == nil {
		writeError(w, badRequest("", "this server cannot reload weights, so it takes no uploads"))
		return
	}
	rest := strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), "/upload_weights/")
	version, name, ok := strings.Cut(rest, "/")
	if !ok || !uploadName.MatchString(version) || !uploadName.MatchString(name) {
		writeError(w, badRequest("", "upload to /upload_weights/VERSION/NAME, each a plain name of letters, digits, '.', '_' and '-' (no separators, no leading dot), not %q", r.URL.Path))
		return
	}
	root, err := s.uploadRoot()
	if err != nil {
		writeError(w, serverError(http.StatusInternalServerError, "the upload folder: %v", err))
		return
	}
	dir := filepath.Join(root, version)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		writeError(w, serverError(http.StatusInternalServerError, "the upload folder: %v", err))
		return
	}
	f, err := os.CreateTemp(dir, "."+name+".part-*")
	if err != nil {
		writeError(w, serverError(http.StatusInternalServerError, "storing %s: %v", name, err))
		return
	}
	n, err := io.Copy(f, http.MaxBytesReader(w, r.Body, maxUpload))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		writeError(w, serverError(http.StatusInternalServerError, "storing %s (%d bytes received): %v", name, n, err))
		return
	}
	writeJSON(w, http.StatusOK, wire.UploadWeightsResponse{ModelPath: dir, Bytes: n})
}

// pruneUploads, after the weights in dir were loaded, removes every other version folder under
// the upload root (nothing when dir is not one of them).
func (s *Server) pruneUploads(dir string) error {
	s.mu.Lock()
	root := s.uploads
	s.mu.Unlock()
	if root == "" || filepath.Dir(filepath.Clean(dir)) != filepath.Clean(root) {
		return nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != filepath.Base(dir) {
			if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
				return fmt.Errorf("removing the earlier upload %s: %w", e.Name(), err)
			}
		}
	}
	return nil
}

// removeUploads removes the private upload folder (Close).
func (s *Server) removeUploads() {
	s.mu.Lock()
	dir, own := s.uploads, s.ownUploads
	s.mu.Unlock()
	if own {
		_ = os.RemoveAll(dir)
	}
}
