package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Listen opens a TCP listener for the handler on addr, safely: an address
// without a host (":9180") listens on 127.0.0.1, "localhost" on 127.0.0.1,
// and a host that is not a loopback address is refused with an error
// wrapping [ErrConfig] unless [Config.AllowRemote] is set. Port 0 picks a
// free port (see the listener's Addr). With [Config.TLS] the listener
// serves TLS; without it, an address other than loopback is refused when
// the handler serves a console ([Config.Console]).
func (h *Handler) Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, configErr("addr", fmt.Sprintf("%q: %v", addr, err))
	}
	switch host {
	case "", "localhost":
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if !h.remote && (ip == nil || !ip.IsLoopback()) {
		return nil, configErr("addr", fmt.Sprintf("%q is not a loopback address; set Config.AllowRemote to listen on it", addr))
	}
	if h.tls == nil && h.console != nil && (ip == nil || !ip.IsLoopback()) {
		return nil, configErr("TLS", fmt.Sprintf("%q is not a loopback address: the console under /ui/ is served there over TLS only (its logins and session cookies would cross the network in the clear); set Config.TLS with a certificate", addr))
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil || h.tls == nil {
		return ln, err
	}
	return tls.NewListener(ln, h.tls), nil
}

// Serve serves the handler on ln until ctx ends, then shuts the server
// down, giving requests in flight up to 5 seconds. It returns nil after ctx
// ends, or the server's error. It closes ln.
func (h *Handler) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	h.log.Info("admin: serving", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ListenAndServe listens on addr as [Handler.Listen] does and serves until
// ctx ends, as [Handler.Serve] does.
func (h *Handler) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := h.Listen(addr)
	if err != nil {
		return err
	}
	return h.Serve(ctx, ln)
}
