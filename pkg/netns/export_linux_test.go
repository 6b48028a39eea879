package netns

// SetSetns replaces setns(2) for a test and returns the restore.
func SetSetns(f func(fd, nstype int) error) func() {
	old := setns
	setns = f
	return func() { setns = old }
}
