//go:build !linux

package blob

import (
	"errors"
	"os"
)

var errNoXattr = errors.New("blob: extended attributes are used on Linux only")

// setXattrMeta is unavailable here: metadata goes to the sidecar file.
func setXattrMeta(*os.File, localMeta) error { return errNoXattr }

// getXattrMeta is unavailable here: metadata comes from the sidecar file.
func getXattrMeta(string) ([]byte, error) { return nil, errNoXattr }
