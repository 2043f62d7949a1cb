// Package origin is a depositor's origin server in small: files served
// over HTTP (GET and HEAD, with their length), and the checkm batch
// manifest that names them, as ingest fetches them. `archivist dev --demo`
// serves its demo batch with it, and the end-to-end tests theirs.
package origin

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"net/http"
	pathpkg "path"
	"strings"
	"sync"
)

// Origin serves files by path; files may be added while it serves.
type Origin struct {
	mu    sync.Mutex
	files map[string][]byte
}

// New is an origin serving files (path → body).
func New(files map[string][]byte) *Origin {
	o := &Origin{files: map[string][]byte{}}
	for p, b := range files {
		o.files[p] = b
	}
	return o
}

// Add serves body at path.
func (o *Origin) Add(path string, body []byte) {
	o.mu.Lock()
	o.files[path] = body
	o.mu.Unlock()
}

// ServeHTTP answers GET and HEAD of a file with its length, 404 otherwise.
func (o *Origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	body, ok := o.files[r.URL.Path]
	o.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// File is one row of a batch manifest: the file at Path of the origin,
// stored under Name with the depositor's LocalID.
type File struct {
	Path, Name, LocalID string
	Body                []byte
}

// Manifest is a checkm batch manifest (mrt-batch-manifest) of files served
// at base: each file's URL, MD5, size, name and local identifier.
func Manifest(base string, files []File) []byte {
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-batch-manifest\n")
	m.WriteString("#%fields | nfo:fileUrl | nfo:hashAlgorithm | nfo:hashValue | nfo:fileSize | nfo:fileLastModified | nfo:fileName | mrt:localIdentifier\n")
	for _, f := range files {
		sum := md5.Sum(f.Body)
		fmt.Fprintf(&m, "%s%s | md5 | %s | %d | | %s | %s\n", base, f.Path, hex.EncodeToString(sum[:]), len(f.Body), f.Name, f.LocalID)
	}
	m.WriteString("#%eof\n")
	return []byte(m.String())
}

// AddBatch serves files and their manifest at manifestPath, and returns the
// manifest's URL under base.
func (o *Origin) AddBatch(base, manifestPath string, files []File) string {
	for _, f := range files {
		o.Add(f.Path, f.Body)
	}
	o.Add(manifestPath, Manifest(base, files))
	return base + manifestPath
}

// Object is one object of a manifest of manifests: its files, listed by a
// manifest at ManifestPath, deposited under LocalID.
type Object struct {
	ManifestPath, LocalID string
	Files                 []File
}

// AddManifestOfManifests serves every object's files and manifest, and a
// manifest of those manifests at path (each row a manifest's URL, its file
// name and the object's local identifier); it returns its URL under base.
func (o *Origin) AddManifestOfManifests(base, path string, objects []Object) string {
	var m strings.Builder
	m.WriteString("#%checkm_0.7\n#%profile | http://uc3.cdlib.org/registry/ingest/manifest/mrt-manifest-of-manifests\n")
	m.WriteString("#%fields | nfo:fileUrl | nfo:fileName | mrt:localIdentifier\n")
	for _, obj := range objects {
		o.AddBatch(base, obj.ManifestPath, obj.Files)
		fmt.Fprintf(&m, "%s%s | %s | %s\n", base, obj.ManifestPath, pathpkg.Base(obj.ManifestPath), obj.LocalID)
	}
	m.WriteString("#%eof\n")
	o.Add(path, []byte(m.String()))
	return base + path
}
