package netns_test

import (
	"fmt"
	"strconv"
)

func errorf(f string, a ...any) error { return fmt.Errorf(f, a...) }

func itoa(i int) string { return strconv.Itoa(i) }
