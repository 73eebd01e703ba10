package console

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/consumer"
)

// The live view: the consumer page shows rates, lag and stuck time over
// the last minutes, from samples of each consumer's Stats taken by the
// console itself (no metrics system), and refreshes itself when asked
// (?live=1).

// Defaults of the live view.
const (
	DefaultLiveEvery = 5 * time.Second
	liveKeep         = 120 // samples kept: ten minutes at the default pace
)

// sample is one reading of a consumer's Stats.
type sample struct {
	at                                time.Time
	consumed, processed, deadLettered uint64
	lag                               int64         // the known lag of its partitions, summed
	stuckFor                          time.Duration // its longest stuck partition's time
}

func sampleOf(st consumer.Stats, now time.Time) sample {
	s := sample{at: now, consumed: st.Consumed, processed: st.Processed, deadLettered: st.DeadLettered}
	for _, p := range st.Partitions {
		if p.Lag > 0 {
			s.lag += p.Lag
		}
	}
	for _, k := range st.Stuck {
		if !k.Since.IsZero() {
			s.stuckFor = max(s.stuckFor, now.Sub(k.Since))
		}
	}
	return s
}

// live samples the consumers. Its goroutine owns the samples; pages ask
// it for a copy.
type live struct {
	every time.Duration
	ask   chan liveAsk
	stop  chan struct{}
	done  chan struct{}
}

type liveAsk struct {
	name  string
	reply chan []sample
}

func startLive(consumers map[string]admin.Consumer, every time.Duration) *live {
	l := &live{every: every, ask: make(chan liveAsk), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(consumers)
	return l
}

func (l *live) run(consumers map[string]admin.Consumer) {
	defer close(l.done)
	rings := make(map[string][]sample, len(consumers))
	take := func() {
		now := time.Now()
		for name, c := range consumers {
			r := append(rings[name], sampleOf(c.Stats(), now))
			if len(r) > liveKeep {
				r = slices.Delete(r, 0, len(r)-liveKeep)
			}
			rings[name] = r
		}
	}
	take()
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			take()
		case a := <-l.ask:
			a.reply <- slices.Clone(rings[a.name])
		case <-l.stop:
			return
		}
	}
}

// samples returns a copy of name's samples, oldest first.
func (l *live) samples(name string) []sample {
	reply := make(chan []sample, 1)
	select {
	case l.ask <- liveAsk{name, reply}:
		return <-reply
	case <-l.done:
		return nil
	}
}

func (l *live) close() {
	close(l.stop)
	<-l.done
}

// liveView is what the consumer page shows of the samples.
type liveView struct {
	On      bool   // the page refreshes itself
	Every   int    // seconds between refreshes
	Span    string // how long the samples cover
	Samples int
	Charts  []spark
}

// spark is one small line chart, drawn as SVG by the template.
type spark struct {
	ID, Name string
	Now, Max string
	Points   string // the polyline's points
	W, H     int
}

const sparkW, sparkH = 240, 48

// view draws the samples: processed and dead-lettered records per second
// between two samples, the lag, and the longest stuck time.
func (l *live) view(ss []sample, on bool) liveView {
	v := liveView{On: on, Every: max(1, int(l.every/time.Second)), Samples: len(ss)}
	if len(ss) > 1 {
		v.Span = ss[len(ss)-1].at.Sub(ss[0].at).Round(time.Second).String()
	}
	rate := func(f func(sample) uint64) []float64 {
		out := make([]float64, 0, len(ss))
		for i := 1; i < len(ss); i++ {
			dt := ss[i].at.Sub(ss[i-1].at).Seconds()
			a, b := f(ss[i-1]), f(ss[i])
			if dt <= 0 || b < a {
				out = append(out, 0)
				continue
			}
			out = append(out, float64(b-a)/dt)
		}
		return out
	}
	var lag, stuck []float64
	for _, s := range ss {
		lag = append(lag, float64(s.lag))
		stuck = append(stuck, s.stuckFor.Seconds())
	}
	v.Charts = []spark{
		drawSpark("processed", "processed records/s", rate(func(s sample) uint64 { return s.processed }), perSecond),
		drawSpark("dead-lettered", "dead letters/s", rate(func(s sample) uint64 { return s.deadLettered }), perSecond),
		drawSpark("lag", "lag (records)", lag, count),
		drawSpark("stuck", "longest stuck (s)", stuck, seconds),
	}
	return v
}

func perSecond(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func count(v float64) string     { return strconv.FormatInt(int64(v), 10) }
func seconds(v float64) string   { return strconv.FormatInt(int64(v), 10) }

// drawSpark scales vs to the chart: the newest on the right, zero at the
// bottom.
func drawSpark(id, name string, vs []float64, format func(float64) string) spark {
	sp := spark{ID: id, Name: name, W: sparkW, H: sparkH, Now: "-", Max: "-"}
	if len(vs) == 0 {
		return sp
	}
	top := slices.Max(vs)
	sp.Now, sp.Max = format(vs[len(vs)-1]), format(top)
	if top <= 0 {
		top = 1
	}
	var b strings.Builder
	for i, v := range vs {
		x := sparkW - 1
		if len(vs) > 1 {
			x = i * (sparkW - 1) / (len(vs) - 1)
		}
		y := sparkH - 1 - int(v/top*float64(sparkH-2))
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d,%d", x, y)
	}
	sp.Points = b.String()
	return sp
}
