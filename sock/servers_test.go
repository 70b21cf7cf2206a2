package sock

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// TestHTTPUnmodified serves net/http on a sock listener and fetches with an
// http.Client whose only change is its DialContext.
func TestHTTPUnmodified(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx := context.Background()
			ln, err := Listen(ctx, testURI(t, tr))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			mux := http.NewServeMux()
			mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprintf(w, "hello, %s", r.URL.Query().Get("who"))
			})
			mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
				io.Copy(w, r.Body)
			})
			srv := &http.Server{Handler: mux}
			go srv.Serve(ln)
			defer srv.Close()
			uri := ln.Addr().String()
			client := &http.Client{Transport: &http.Transport{
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return Dial(ctx, uri) },
			}, Timeout: 20 * time.Second}
			defer client.CloseIdleConnections()
			var wg sync.WaitGroup
			errs := make(chan error, 8*20)
			for g := 0; g < 8; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < 20; i++ {
						who := fmt.Sprintf("g%d-%d", g, i)
						resp, err := client.Get("http://sock/hello?who=" + who)
						if err != nil {
							errs <- err
							return
						}
						body, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || string(body) != "hello, "+who {
							errs <- fmt.Errorf("GET %s: %q, %v", who, body, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// A body larger than any ring and window.
			big := strings.Repeat("0123456789abcdef", 1<<18) // 4 MiB
			resp, err := client.Post("http://sock/echo", "application/octet-stream", strings.NewReader(big))
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || string(body) != big {
				t.Fatalf("echo of %d bytes: got %d bytes, %v", len(big), len(body), err)
			}
		})
	}
}

// TestGRPCUnmodified serves gRPC (the health service, unary and streaming)
// on a sock listener; the client changes only its dialer.
func TestGRPCUnmodified(t *testing.T) {
	for _, tr := range []string{"shm", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ln, err := Listen(ctx, testURI(t, tr))
			if err != nil {
				t.Fatal(err)
			}
			s := grpc.NewServer()
			hs := health.NewServer()
			healthpb.RegisterHealthServer(s, hs)
			go s.Serve(ln)
			defer s.Stop()
			uri := ln.Addr().String()
			cc, err := grpc.NewClient("passthrough:///sock",
				grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return Dial(ctx, uri) }),
				grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			hc := healthpb.NewHealthClient(cc)
			hs.SetServingStatus("kv", healthpb.HealthCheckResponse_SERVING)
			for i := 0; i < 50; i++ {
				resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "kv"})
				if err != nil {
					t.Fatal(err)
				}
				if resp.Status != healthpb.HealthCheckResponse_SERVING {
					t.Fatalf("status %v", resp.Status)
				}
			}
			if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "nope"}); err == nil {
				t.Fatal("Check of an unknown service succeeded")
			}
			w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: "kv"})
			if err != nil {
				t.Fatal(err)
			}
			first, err := w.Recv()
			if err != nil || first.Status != healthpb.HealthCheckResponse_SERVING {
				t.Fatalf("first watch update %v, %v", first, err)
			}
			hs.SetServingStatus("kv", healthpb.HealthCheckResponse_NOT_SERVING)
			next, err := w.Recv()
			if err != nil || next.Status != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("second watch update %v, %v", next, err)
			}
		})
	}
}
