package roce

import "fmt"

// enumName returns the name of v in names, or kind(v) for a value names
// does not name.
func enumName[T ~uint8 | ~int](names []string, v T, kind string) string {
	if i := int(v); i >= 0 && i < len(names) && names[i] != "" {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", kind, int(v))
}
