package console

import (
	"fmt"
	"sort"
	"time"
)

// chart is the stacked bar chart of letters over time, drawn as SVG by
// the template: no script.
type chart struct {
	Width, Height int
	Bars          []bar
	Series        []series
	Max           int
	Bucket        string
	From, To      string
	YTicks        []tick
}

type bar struct {
	Rects []rect
	Title string // the tooltip: time and counts
}

type rect struct {
	X, Y, W, H int
	Class      string
}

type series struct {
	Name  string
	Class string
	Count int
}

type tick struct {
	Y     int
	Label string
}

const (
	chartW, chartH = 900, 220
	chartTop       = 10
	chartLeft      = 50
	chartBottom    = 20
	colors         = 8 // classes s0..s7 in the style sheet, s8 for the rest
)

func (s *topicStats) chart() *chart {
	if len(s.buckets) == 0 {
		return nil
	}
	// Series by total, the largest first; past the palette, "other".
	totals := map[string]int{}
	for _, m := range s.buckets {
		for k, v := range m {
			totals[k] += v
		}
	}
	names := sorted(totals, 0)
	class := map[string]string{}
	c := &chart{Width: chartW, Height: chartH}
	for i, n := range names {
		cl := fmt.Sprintf("s%d", min(i, colors))
		if i < colors {
			c.Series = append(c.Series, series{Name: n.Key, Class: cl, Count: n.Count})
		} else if i == colors {
			c.Series = append(c.Series, series{Name: "other", Class: cl, Count: n.Count})
		} else {
			c.Series[colors].Count += n.Count
		}
		class[n.Key] = cl
	}
	var keys []int64
	for b := range s.buckets {
		keys = append(keys, b)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	first, last := keys[0], keys[len(keys)-1]
	// At least 24 slots, so that a burst within one bucket is a bar, not
	// a wall.
	n := max(int(last-first)+1, 24)
	for _, m := range s.buckets {
		t := 0
		for _, v := range m {
			t += v
		}
		c.Max = max(c.Max, t)
	}
	plotW, plotH := chartW-chartLeft, chartH-chartTop-chartBottom
	bw := max(plotW/n, 1)
	w := int64(s.width / time.Second)
	for _, b := range keys {
		m := s.buckets[b]
		x := chartLeft + int(b-first)*plotW/n
		y := chartTop + plotH
		br := bar{}
		title := time.Unix(b*w, 0).UTC().Format("2006-01-02 15:04:05")
		for _, sr := range names {
			v := m[visibleKey(sr.Key, m)]
			if v == 0 {
				continue
			}
			hgt := max(v*plotH/c.Max, 1)
			y -= hgt
			br.Rects = append(br.Rects, rect{X: x, Y: y, W: max(bw-1, 1), H: hgt, Class: class[sr.Key]})
			title += fmt.Sprintf(" · %s %d", sr.Key, v)
		}
		br.Title = title
		c.Bars = append(c.Bars, br)
	}
	prev := -1
	for i := 0; i <= 4; i++ {
		v := c.Max * i / 4
		if v == prev {
			continue
		}
		prev = v
		c.YTicks = append(c.YTicks, tick{Y: chartTop + plotH - v*plotH/c.Max, Label: fmt.Sprint(v)})
	}
	c.Bucket = s.width.String()
	c.From = time.Unix(first*w, 0).UTC().Format(time.RFC3339)
	// The right edge of the plot: n slots after the first, which is past
	// the last bucket when there are fewer than 24.
	c.To = time.Unix((first+int64(n))*w, 0).UTC().Format(time.RFC3339)
	return c
}

// visibleKey finds the raw series key of m whose visible form is k (the
// sorted totals hold visible forms).
func visibleKey(k string, m map[string]int) string {
	if _, ok := m[k]; ok {
		return k
	}
	for raw := range m {
		if visible(raw) == k {
			return raw
		}
	}
	return k
}
