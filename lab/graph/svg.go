package graph

import (
	"bytes"
	"fmt"
	"io"

	svg "github.com/ajstarks/svgo"
)

// The SVG's grid, in pixels.
const (
	margin  = 20
	colW    = 180 // a column: a box and the gap to the next
	boxW    = 160
	boxH    = 54
	lineH   = 14
	barH    = 26
	rowGap  = 34
	podGap  = 14
	topY    = 40
	fontCSS = "font-family:Helvetica,Arial,sans-serif;font-size:11px"
)

// SVG draws the lab in rows: clients, load balancers and the control plane
// above the node network, the nodes below it with each node's pods in a column
// under it, and the Service ports at the bottom, dashed lines to their endpoints.
func SVG(w io.Writer, l Lab) error {
	// svgo writes as it goes and drops write errors: it writes here, and this
	// writes the whole.
	var buf bytes.Buffer
	lo := layOut(l)
	cols := max(len(lo.top), len(lo.nodes), len(lo.services), 1)
	width := 2*margin + cols*colW
	barY := topY + boxH + rowGap
	nodeY := barY + barH + rowGap
	podY := nodeY + boxH + rowGap
	deepest := 0
	for _, n := range lo.nodes {
		deepest = max(deepest, len(lo.pods[n.Name]))
	}
	svcY := podY + deepest*(boxH+podGap) + rowGap
	height := svcY + boxH + margin
	if len(lo.services) == 0 {
		height = svcY
	}

	// Centre every row's boxes.
	x := func(i, n int) int { return (width-n*colW)/2 + i*colW + (colW-boxW)/2 }
	type box struct{ x, y int }
	where := map[string]box{}

	c := svg.New(&buf)
	c.Start(width, height)
	c.Title("svclab lab " + l.Name)
	c.Rect(0, 0, width, height, "fill:white")
	c.Gstyle(fontCSS)
	c.Text(margin, margin+4, "lab "+l.Name, "font-weight:bold;font-size:13px")

	// Wires first, so boxes cover their ends.
	c.Gstyle("stroke:#888;stroke-width:1.5")
	for i := range lo.top {
		cx := x(i, len(lo.top)) + boxW/2
		c.Line(cx, topY+boxH, cx, barY)
	}
	for i, n := range lo.nodes {
		cx := x(i, len(lo.nodes)) + boxW/2
		c.Line(cx, barY+barH, cx, nodeY)
		if pods := lo.pods[n.Name]; len(pods) > 0 {
			c.Line(cx, nodeY+boxH, cx, podY+(len(pods)-1)*(boxH+podGap))
		}
		for k, p := range lo.pods[n.Name] {
			where[p.Name] = box{x(i, len(lo.nodes)), podY + k*(boxH+podGap)}
		}
	}
	c.Gend()
	c.Gstyle("stroke:#3a7bd5;stroke-width:1.2;stroke-dasharray:5,4;fill:none")
	for i := range lo.services {
		sx := x(i, len(lo.services)) + boxW/2
		for _, p := range lo.endpointPods[i] {
			b := where[p]
			c.Line(sx, svcY, b.x+boxW, b.y+boxH/2)
		}
	}
	c.Gend()

	c.Rect(margin, barY, width-2*margin, barH, "fill:#eeeeee;stroke:#888")
	c.Text(width/2, barY+barH/2+4, l.Network, "text-anchor:middle")
	for i, m := range lo.top {
		drawBox(c, x(i, len(lo.top)), topY, memberLabel(m), "fill:#fff7e0;stroke:#b08a2e")
	}
	for i, n := range lo.nodes {
		drawBox(c, x(i, len(lo.nodes)), nodeY, memberLabel(n), "fill:#e8f4e8;stroke:#4a8a4a")
		for _, p := range lo.pods[n.Name] {
			b := where[p.Name]
			drawBox(c, b.x, b.y, memberLabel(p), "fill:white;stroke:#4a8a4a")
		}
	}
	for i, s := range lo.services {
		drawBox(c, x(i, len(lo.services)), svcY, serviceLabel(s), "fill:#ddeeff;stroke:#3a7bd5")
	}
	c.Gend()
	c.End()
	_, err := buf.WriteTo(w)
	return err
}

// drawBox draws a rounded box at x, y with lines of text, the first in bold.
func drawBox(c *svg.SVG, x, y int, lines []string, style string) {
	c.Roundrect(x, y, boxW, boxH, 6, 6, style)
	top := y + (boxH-len(lines)*lineH)/2 + lineH - 3
	for i, l := range lines {
		st := "text-anchor:middle"
		if i == 0 {
			st += ";font-weight:bold"
		}
		c.Text(x+boxW/2, top+i*lineH, fmt.Sprint(l), st)
	}
}
