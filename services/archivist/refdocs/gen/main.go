// Command gen fills the generated reference tables of the repository
// whose root is its argument (refdocs.Update).
package main

import (
	"fmt"
	"os"

	"github.com/archivist/archivist/services/archivist/refdocs"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gen REPOSITORY-ROOT")
		os.Exit(2)
	}
	changed, err := refdocs.Update(os.Args[1], true)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refdocs:", err)
		os.Exit(1)
	}
	for _, f := range changed {
		fmt.Println("refdocs: wrote", f)
	}
}
