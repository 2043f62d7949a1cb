package blob

import (
	"encoding/json"
	"os"

	"golang.org/x/sys/unix"
)

const xattrName = "user.archivist.meta"

// setXattrMeta records m in an extended attribute of f.
func setXattrMeta(f *os.File, m localMeta) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return unix.Fsetxattr(int(f.Fd()), xattrName, b, 0)
}

// getXattrMeta reads what setXattrMeta recorded on the file at path.
func getXattrMeta(path string) ([]byte, error) {
	buf := make([]byte, 512)
	for {
		n, err := unix.Getxattr(path, xattrName, buf)
		if err == unix.ERANGE {
			sz, err := unix.Getxattr(path, xattrName, nil)
			if err != nil {
				return nil, err
			}
			buf = make([]byte, sz)
			continue
		}
		if err != nil {
			return nil, err
		}
		return buf[:n], nil
	}
}
