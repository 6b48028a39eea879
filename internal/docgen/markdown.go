package docgen

import "strings"

// cellEscaper makes text from the code safe in a Markdown table cell as
// GitHub renders it: a "|" would end the cell, "<...>" would be taken for
// an HTML tag and dropped, and "*" could start emphasis.
var cellEscaper = strings.NewReplacer(`\`, `\\`, "|", `\|`, "<", "&lt;", ">", "&gt;", "*", `\*`, "\n", " ")

// Cell is s escaped for a Markdown table cell.
func Cell(s string) string { return cellEscaper.Replace(s) }

// Code is s as inline code in a table cell. A backquote in s takes a
// longer fence; a "|" needs its escape even there.
func Code(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + strings.ReplaceAll(s, "|", `\|`) + pad + fence
}
