// Package ctl is antidote ctl: a client of a running consumer's admin API.
package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
)

// EnvAdminURL is the fallback of antidote ctl's --admin flag.
const EnvAdminURL = "ANTIDOTE_ADMIN_URL"

// ctlClient talks to the admin API of a running consumer (package admin).
type ctlClient struct {
	base     *url.URL
	token    string
	consumer string
	http     *http.Client
}

// NewCommand builds antidote ctl and its subcommands, which talk to the
// admin API of a running consumer.
func NewCommand() *cobra.Command {
	var adminURL, token, consumerName string
	cmd := &cobra.Command{
		Use:   "ctl",
		Short: "See and steer a running consumer through its admin API",
		Long: `Talk to the admin API of a running Antidote consumer (package admin): show
its partitions, lag and stuck records, flip the retry kill switch, skip the
record a partition is stuck on or send it to its dead-letter topic, pause
and resume a partition, resume a consumer stopped by its flood guard.

The token is the admin API's bearer token: --token, or the environment
variable ` + admin.EnvToken + `. With several consumers behind one admin API,
--consumer names the one to act on.`,
		Example: `  antidote ctl --admin http://127.0.0.1:9180 status
  antidote ctl --admin http://127.0.0.1:9180 retry off
  antidote ctl --admin http://127.0.0.1:9180 skip orders 3 1234
  antidote ctl --admin http://127.0.0.1:9180 deadletter orders 3 1234 --who alice
  antidote ctl --admin http://127.0.0.1:9180 pause orders 3
  antidote ctl --admin http://127.0.0.1:9180 flood resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Usagef("ctl: name a command: status, retry, skip, deadletter, pause, resume or flood")
		},
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&adminURL, "admin", "", "base URL of the admin API, for example http://127.0.0.1:9180 (env "+EnvAdminURL+")")
	pf.StringVar(&token, "token", "", "bearer token of the admin API (env "+admin.EnvToken+")")
	pf.StringVar(&consumerName, "consumer", "", "the consumer to act on, when the admin API serves several")

	client := func(cmd *cobra.Command) (*ctlClient, error) {
		return newCtlClient(adminURL, token, consumerName, cli.ReadGlobals(cmd).Timeout)
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "Show readiness, the kill switch, partitions, lag and stuck records",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client(cmd)
			if err != nil {
				return err
			}
			return c.status(cmd.Context(), cmd.OutOrStdout(), cli.ReadGlobals(cmd).JSON())
		},
	}
	retry := &cobra.Command{
		Use:       "retry on|off",
		Short:     "Turn retrying on or off (the kill switch)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"on", "off"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "on" && args[0] != "off" {
				return cli.Usagef("retry %q: want on or off", args[0])
			}
			c, err := client(cmd)
			if err != nil {
				return err
			}
			var out admin.RetryResponse
			if err := c.post(cmd.Context(), "/retry", url.Values{"enabled": {args[0]}}, &out); err != nil {
				return err
			}
			return c.print(cmd, out, fmt.Sprintf("%s: retrying %s", out.Consumer, onOff(out.RetryEnabled)))
		},
	}
	// stuckAction is a command on the record a partition is stuck on.
	stuckAction := func(use, short, action, done string, extra func(*cobra.Command, url.Values)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " TOPIC PARTITION OFFSET",
			Short: short,
			Args:  cobra.ExactArgs(3),
			RunE: func(cmd *cobra.Command, args []string) error {
				part, err := partitionArg(args[1])
				if err != nil {
					return err
				}
				off, err := strconv.ParseInt(args[2], 10, 64)
				if err != nil || off < 0 {
					return cli.Usagef("offset %q: want a number from 0", args[2])
				}
				c, err := client(cmd)
				if err != nil {
					return err
				}
				q := url.Values{"offset": {strconv.FormatInt(off, 10)}}
				if extra != nil {
					extra(cmd, q)
				}
				var out admin.PartitionResponse
				if err := c.post(cmd.Context(), partitionPath(args[0], part, action), q, &out); err != nil {
					return err
				}
				return c.print(cmd, out, fmt.Sprintf("%s: %s %s/%d at offset %d", out.Consumer, done, out.Topic, out.Partition, off))
			},
		}
	}
	skip := stuckAction("skip", "Skip the record a partition is stuck on (refused unless it is stuck on exactly OFFSET)", "skip", "skipped", nil)
	var who string
	deadLetter := stuckAction("deadletter",
		"Send the record a partition is stuck on, retrying, to its dead-letter topic (reason operator; refused unless it is stuck on exactly OFFSET)",
		"deadletter", "dead-lettered", func(_ *cobra.Command, q url.Values) {
			if who == "" {
				who = defaultWho()
			}
			q.Set("who", who)
		})
	deadLetter.Flags().StringVar(&who, "who", "", "who asks, named in the letter (default: antidote ctl, your user and host)")
	pauseResume := func(action string) *cobra.Command {
		return &cobra.Command{
			Use:   action + " TOPIC PARTITION",
			Short: strings.ToUpper(action[:1]) + action[1:] + " the fetching and processing of a partition",
			Args:  cobra.ExactArgs(2),
			RunE: func(cmd *cobra.Command, args []string) error {
				part, err := partitionArg(args[1])
				if err != nil {
					return err
				}
				c, err := client(cmd)
				if err != nil {
					return err
				}
				var out admin.PartitionResponse
				if err := c.post(cmd.Context(), partitionPath(args[0], part, action), nil, &out); err != nil {
					return err
				}
				return c.print(cmd, out, fmt.Sprintf("%s: %s %s/%d", out.Consumer, out.Action, out.Topic, out.Partition))
			},
		}
	}
	flood := &cobra.Command{
		Use:       "flood resume",
		Short:     "Resume a consumer stopped by its flood guard (refused unless it tripped)",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"resume"},
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "resume" {
				return cli.Usagef("flood %q: want resume", args[0])
			}
			c, err := client(cmd)
			if err != nil {
				return err
			}
			var out admin.FloodResponse
			if err := c.post(cmd.Context(), "/flood/resume", nil, &out); err != nil {
				return err
			}
			return c.print(cmd, out, fmt.Sprintf("%s: flood guard resumed (it tripped on %s/%d: %d dead letters of the last %d records, %.0f%%)",
				out.Consumer, terminalSafe(out.Resumed.Topic), out.Resumed.Partition, out.Resumed.DeadLetters, out.Resumed.Records, out.Resumed.Percent()))
		},
	}
	cmd.AddCommand(status, retry, skip, deadLetter, pauseResume("pause"), pauseResume("resume"), flood)
	return cmd
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func partitionArg(s string) (int32, error) {
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p < 0 {
		return 0, cli.Usagef("partition %q: want a number from 0", s)
	}
	return int32(p), nil
}

func partitionPath(topic string, part int32, action string) string {
	return "/partitions/" + url.PathEscape(topic) + "/" + strconv.Itoa(int(part)) + "/" + action
}

func newCtlClient(raw, token, consumerName string, timeout time.Duration) (*ctlClient, error) {
	if raw == "" {
		raw = strings.TrimSpace(os.Getenv(EnvAdminURL))
	}
	if raw == "" {
		return nil, cli.Usagef("--admin: the admin API's URL is required (or %s)", EnvAdminURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, cli.Usagef("--admin %q: want http://HOST:PORT or https://HOST:PORT", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if token == "" {
		token = strings.TrimSpace(os.Getenv(admin.EnvToken))
	}
	return &ctlClient{base: u, token: token, consumer: consumerName, http: &http.Client{Timeout: timeout}}, nil
}

// do sends a request and decodes a 2xx JSON answer into out; any other
// answer is an error of one line with the server's message.
func (c *ctlClient) do(ctx context.Context, method, path string, q url.Values, out any) error {
	u := *c.base
	u.Path += path
	if c.consumer != "" {
		if q == nil {
			q = url.Values{}
		}
		q.Set("consumer", c.consumer)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("admin API at %s: %v", c.base.Redacted(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("admin API at %s: reading the answer: %v", c.base.Redacted(), err)
	}
	if resp.StatusCode/100 != 2 {
		var e admin.ErrorResponse
		msg := strings.TrimSpace(string(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		if resp.StatusCode == http.StatusUnauthorized {
			// The server's hint is for HTTP clients; say where ctl
			// takes the token from.
			head, _, _ := strings.Cut(msg, ":")
			if c.token == "" {
				head = "no token given"
			}
			msg = head + ": pass --token or set " + admin.EnvToken + " to the admin API's token (the one it was started with, or the one it printed or logged at start)"
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, terminalSafe(msg))
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the admin API's JSON: %v", method, path, err)
	}
	return nil
}

func (c *ctlClient) post(ctx context.Context, path string, q url.Values, out any) error {
	return c.do(ctx, http.MethodPost, path, q, out)
}

// print writes v as JSON with -o json, else the line.
func (c *ctlClient) print(cmd *cobra.Command, v any, line string) error {
	if cli.ReadGlobals(cmd).JSON() {
		return cli.WriteJSON(cmd.OutOrStdout(), v)
	}
	_, err := fmt.Fprintln(cmd.OutOrStdout(), terminalSafe(line))
	return err
}

// ctlStats is what status reads of each consumer's Stats.
type ctlStats struct {
	Consumed, Processed, Retried, DeadLettered, Skipped, Halted, DeadLetterWriteErrors uint64
	RetryEnabled, Running, Ready                                                       bool
	BufferedRecords                                                                    int
	BufferedBytes                                                                      int64
	Stuck                                                                              []struct {
		Topic     string
		Partition int32
		Offset    int64
		Reason    string
		Attempts  int
		Since     time.Time
		LastError string
	}
	Partitions []struct {
		Topic                         string
		Partition                     int32
		State, Paused                 string
		BufferedRecords               int
		HighWatermark, Committed, Lag int64
	}
	Brokers struct {
		Reachable bool
		LastError string
	}
	Dependencies map[string]string
	Flood        *consumer.Flood
	ShareGroup   *consumer.ShareGroupState
}

func (c *ctlClient) status(ctx context.Context, w io.Writer, asJSON bool) error {
	var raw json.RawMessage
	if err := c.do(ctx, http.MethodGet, "/stats", nil, &raw); err != nil {
		return err
	}
	if asJSON {
		var b bytes.Buffer
		if err := json.Indent(&b, raw, "", "  "); err != nil {
			return err
		}
		b.WriteByte('\n')
		_, err := w.Write(b.Bytes())
		return err
	}
	var all struct {
		Consumers map[string]ctlStats `json:"consumers"`
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		return fmt.Errorf("GET /stats: the answer is not the admin API's JSON: %v", err)
	}
	names := make([]string, 0, len(all.Consumers))
	for name := range all.Consumers {
		names = append(names, name)
	}
	slices.Sort(names)
	var b bytes.Buffer
	now := time.Now()
	for i, name := range names {
		if i > 0 {
			b.WriteByte('\n')
		}
		printCtlStatus(&b, name, all.Consumers[name], now)
	}
	_, err := w.Write(b.Bytes())
	return err
}

func printCtlStatus(w io.Writer, name string, s ctlStats, now time.Time) {
	ready := "READY"
	switch {
	case s.Flood != nil:
		// The consumer is up, but its flood guard holds every partition.
		ready = "HELD BY THE FLOOD GUARD"
	case s.Ready:
	case s.Halted > 0:
		ready = "NOT READY (halted)"
	case !s.Running:
		ready = "NOT READY (not running)"
	default:
		ready = "NOT READY (no partitions)"
	}
	brokers := "reachable"
	if !s.Brokers.Reachable {
		brokers = "UNREACHABLE"
		if s.Brokers.LastError != "" {
			brokers += ": " + s.Brokers.LastError
		}
	}
	fmt.Fprintf(w, "consumer %s: %s, retrying %s, brokers %s\n", terminalSafe(name), ready, onOff(s.RetryEnabled), terminalSafe(brokers))
	if f := s.Flood; f != nil {
		fmt.Fprintf(w, "  flood guard tripped on %s[%d] offset %d %s ago: %d dead letters of the last %d records (%.0f%%, more than %.0f%%); fetching is paused until antidote ctl flood resume\n",
			terminalSafe(f.Topic), f.Partition, f.Offset, cli.Age(now, f.Since), f.DeadLetters, f.Records, f.Percent(), 100*f.Share)
	}
	fmt.Fprintf(w, "  consumed %d  processed %d  retried %d  dead-lettered %d  skipped %d  halted %d  dead-letter write errors %d  buffered %d records, %d bytes\n",
		s.Consumed, s.Processed, s.Retried, s.DeadLettered, s.Skipped, s.Halted, s.DeadLetterWriteErrors, s.BufferedRecords, s.BufferedBytes)
	if len(s.Dependencies) > 0 {
		deps := make([]string, 0, len(s.Dependencies))
		for k, v := range s.Dependencies {
			deps = append(deps, terminalSafe(k+" "+v))
		}
		slices.Sort(deps)
		fmt.Fprintf(w, "  dependencies: %s\n", strings.Join(deps, ", "))
	}
	if sg := s.ShareGroup; sg != nil {
		printShareStatus(w, sg, s, now)
		return
	}
	if len(s.Partitions) == 0 {
		fmt.Fprintln(w, "  no partitions assigned")
		return
	}
	type stuckKey struct {
		topic string
		part  int32
	}
	stuck := map[stuckKey]string{}
	for _, st := range s.Stuck {
		line := fmt.Sprintf("offset %d, %s for %s, %d attempt(s)", st.Offset, st.Reason, cli.Age(now, st.Since), st.Attempts)
		if st.LastError != "" {
			line += ": " + cli.Clip(st.LastError, 120)
		}
		stuck[stuckKey{st.Topic, st.Partition}] = line
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tPAUSED\tLAG\tCOMMITTED\tHIGH WATERMARK\tBUFFERED\tSTUCK ON")
	for _, p := range s.Partitions {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", terminalSafe(p.Topic), p.Partition, terminalSafe(p.State), cli.Dash(terminalSafe(p.Paused)),
			known(p.Lag), known(p.Committed), known(p.HighWatermark), p.BufferedRecords, cli.Dash(terminalSafe(stuck[stuckKey{p.Topic, p.Partition}])))
	}
	_ = tw.Flush()
}

// printShareStatus writes what a share-group member knows of its group,
// and the records it retries in place: it owns no partition.
func printShareStatus(w io.Writer, sg *consumer.ShareGroupState, s ctlStats, now time.Time) {
	fmt.Fprintf(w, "  share group %s: delivery limit %d; acquired %d (%d delivered before), accepted %d, released %d, renewed %d, held now %d\n",
		terminalSafe(sg.Group), sg.DeliveryLimit, sg.Acquired, sg.Redelivered, sg.Accepted, sg.Released, sg.Renewed, sg.Held)
	for _, p := range sg.Problems {
		fmt.Fprintf(w, "  SHARE GROUP SETUP: %s\n", terminalSafe(p))
	}
	if len(s.Stuck) == 0 {
		fmt.Fprintln(w, "  no record retried in place")
		return
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tOFFSET\tRETRYING")
	for _, st := range s.Stuck {
		line := fmt.Sprintf("for %s, %d attempt(s)", cli.Age(now, st.Since), st.Attempts)
		if st.LastError != "" {
			line += ": " + cli.Clip(st.LastError, 120)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", terminalSafe(st.Topic), st.Partition, st.Offset, terminalSafe(line))
	}
	_ = tw.Flush()
}

// known prints an offset or a lag, "-" when unknown (-1).
func known(n int64) string {
	if n < 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

// terminalSafe escapes what a terminal would interpret (control characters,
// escape sequences, invisible format characters) in text from the server.
func terminalSafe(s string) string {
	clean := true
	for _, r := range s {
		if !unicode.IsPrint(r) && r != ' ' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsPrint(r) || r == ' ' {
			b.WriteRune(r)
			continue
		}
		q := strconv.QuoteRuneToASCII(r)
		b.WriteString(q[1 : len(q)-1])
	}
	return b.String()
}

// defaultWho names who asks for a dead letter when --who is not given: the
// command, the user and the host.
func defaultWho() string {
	who := "antidote ctl"
	if u, err := user.Current(); err == nil && u.Username != "" {
		who += ", " + u.Username
		if h, err := os.Hostname(); err == nil && h != "" {
			who += "@" + h
		}
	}
	return who
}
