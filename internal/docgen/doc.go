// Package docgen writes the reference tables of docs/ from the code that
// defines what they describe: a binary's flags from its pflag.FlagSet, its
// metrics from the collectors it registers. Each table lives between two
// HTML comments in a Markdown file (see Region); the binaries' tests compare
// the file with what the code says and rewrite it with -update, so a flag or
// a metric cannot be added, renamed or changed without its docs following.
package docgen
