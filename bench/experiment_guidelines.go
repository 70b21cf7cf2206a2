package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/rdmakit/rdmakit/verbs"
)

func init() {
	Register(Experiment{
		Name: "guidelines",
		Description: "Kalia et al.'s guidelines where they mean something in software, over tcp: doorbell batching, " +
			"selective signaling, inline payloads, header-only SEND with immediate, several QPs per worker — each on and off",
		Run: runGuidelines,
	})
}

var guidelineColumns = []Column{
	{Name: "guideline"}, {Name: "setting"}, {Name: "op"}, {Name: "rate", Unit: "Mops"}, {Name: "vs_off", Unit: "×"},
}

// guidelineCase is one measured configuration.
type guidelineCase struct {
	guideline, setting string
	op                 verbs.Opcode
	size               int
	doorbellPerWR      bool
	signalEvery        int // 1: every request signaled
	inline             bool
	qps                int
	headerOnly         bool
}

func runGuidelines(ctx context.Context, env *Env) (*Result, error) {
	point := env.PointDuration(time.Second, 100*time.Millisecond)
	r := &Result{
		Name:    "guidelines",
		Title:   "design guidelines of Kalia et al. on rdmakit's tcp transport, each on and off",
		Columns: guidelineColumns,
		Plots:   []Plot{{Title: "throughput of each guideline's settings", Y: "rate", Series: []string{"guideline", "setting"}, Bars: true}},
	}
	cases := []guidelineCase{
		{guideline: "doorbell batching", setting: "off: one write per request", op: verbs.OpRead, size: 8, doorbellPerWR: true, signalEvery: 16, qps: 1},
		{guideline: "doorbell batching", setting: "on: one write per list of 16", op: verbs.OpRead, size: 8, signalEvery: 16, qps: 1},
		{guideline: "selective signaling", setting: "off: every request signaled", op: verbs.OpRead, size: 8, signalEvery: 1, qps: 1},
		{guideline: "selective signaling", setting: "on: every 16th signaled", op: verbs.OpRead, size: 8, signalEvery: 16, qps: 1},
		{guideline: "inline", setting: "off", op: verbs.OpWrite, size: 64, signalEvery: 16, qps: 1},
		{guideline: "inline", setting: "on", op: verbs.OpWrite, size: 64, signalEvery: 16, qps: 1, inline: true},
		{guideline: "header-only SEND", setting: "off: SEND of 32 B", op: verbs.OpSend, size: 32, signalEvery: 16, qps: 1},
		{guideline: "header-only SEND", setting: "on: SEND_WITH_IMM of 0 B", op: verbs.OpSendWithImm, size: 0, signalEvery: 16, qps: 1, headerOnly: true},
		{guideline: "QPs per worker", setting: "off: 1 QP", op: verbs.OpRead, size: 8, signalEvery: 16, qps: 1},
		{guideline: "QPs per worker", setting: "on: 4 QPs, lists round-robin", op: verbs.OpRead, size: 8, signalEvery: 16, qps: 4},
	}
	bar := env.Progress(len(cases), time.Duration(len(cases))*point, "guidelines")
	defer bar.Finish()
	var off float64
	for i, c := range cases {
		rate, err := runGuideline(ctx, c, point)
		if err != nil {
			return nil, fmt.Errorf("guidelines %s %s: %w", c.guideline, c.setting, err)
		}
		var vs any
		if i%2 == 0 {
			off = rate
		} else if off > 0 {
			vs = rate / off
		}
		r.AddRow(c.guideline, c.setting, c.op.String(), rate, vs)
		bar.Add(1)
	}
	r.Meta.Transport = "tcp"
	r.Notes = append(r.Notes,
		"Client and server are tcp devices in this process, over 127.0.0.1; the client keeps 256 requests outstanding, posted in lists of 16; rate is completed requests per second.",
		"doorbell batching off is the tcp device option doorbell=wr: the soft NIC link writes each request to the socket on its own instead of one write per post list.",
		"selective signaling: a completion for every request vs for the last of each list. inline: the payload copied at post (FlagInline). header-only SEND: a SEND_WITH_IMM without payload (the immediate is the message) vs a 32-byte SEND; the server re-posts receives. QPs per worker: the same load spread over 4 QPs.",
		"vs_off is each 'on' rate over its 'off' rate.",
		fmt.Sprintf("Each point ran %v.", point),
	)
	return r, nil
}

// runGuideline measures one configuration and returns its rate in Mops.
func runGuideline(ctx context.Context, c guidelineCase, point time.Duration) (float64, error) {
	uri := "tcp://127.0.0.1:0"
	if c.doorbellPerWR {
		uri += "?doorbell=wr"
	}
	client, err := verbs.Open(uri)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	server, err := verbs.Open("tcp://127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer server.Close()
	cpd, _ := client.AllocPD()
	spd, _ := server.AllocPD()
	const window, list = 256, 16
	ccq, err := client.CreateCQ(4096)
	if err != nil {
		return 0, err
	}
	scq, err := server.CreateCQ(8192)
	if err != nil {
		return 0, err
	}
	local, _ := cpd.AllocMR(1<<16, verbs.AccessAll)
	remote, _ := spd.AllocMR(1<<16, verbs.AccessAll)
	qps := make([]verbs.QP, c.qps)
	sqps := make([]verbs.QP, c.qps)
	for i := range qps {
		if qps[i], err = cpd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: ccq, RecvCQ: ccq, Cap: verbs.QPCap{MaxSendWR: 1024}}); err != nil {
			return 0, err
		}
		if sqps[i], err = spd.CreateQP(verbs.QPInitAttr{Type: verbs.RC, SendCQ: scq, RecvCQ: scq, Cap: verbs.QPCap{MaxRecvWR: 4096}}); err != nil {
			return 0, err
		}
		if err := verbs.ConnectRC(qps[i], verbs.AccessAll, server.Address(), sqps[i].QPN()); err != nil {
			return 0, err
		}
		if err := verbs.ConnectRC(sqps[i], verbs.AccessAll, client.Address(), qps[i].QPN()); err != nil {
			return 0, err
		}
	}
	// Two-sided cases: the server keeps receives posted.
	stop := make(chan struct{})
	serverDone := make(chan error, 1)
	if c.op == verbs.OpSend || c.op == verbs.OpSendWithImm {
		recv := make([]verbs.RecvWR, 2048)
		for i := range recv {
			recv[i] = verbs.RecvWR{ID: uint64(i), SGL: []verbs.SGE{{Addr: remote.Addr() + uint64(i%512)*64, Length: 64, LKey: remote.LKey()}}}
		}
		for _, q := range sqps {
			if err := q.PostRecv(recv); err != nil {
				return 0, err
			}
		}
		go func() {
			wc := make([]verbs.WC, 256)
			one := make([]verbs.RecvWR, 1)
			for {
				select {
				case <-stop:
					serverDone <- nil
					return
				default:
				}
				n, err := scq.Poll(wc)
				if err != nil {
					serverDone <- err
					return
				}
				for i := 0; i < n; i++ {
					one[0] = verbs.RecvWR{ID: wc[i].ID, SGL: []verbs.SGE{{Addr: remote.Addr() + (wc[i].ID%512)*64, Length: 64, LKey: remote.LKey()}}}
					for _, q := range sqps {
						if q.QPN() == wc[i].QPN {
							if err := q.PostRecv(one); err != nil {
								serverDone <- err
								return
							}
						}
					}
				}
				if n == 0 {
					time.Sleep(time.Microsecond)
				}
			}
		}()
	} else {
		close(serverDone)
	}
	wrs := make([]verbs.SendWR, list)
	sgl := make([]verbs.SGE, list)
	for i := range wrs {
		sgl[i] = verbs.SGE{Addr: local.Addr() + uint64(i)*128, Length: uint32(c.size), LKey: local.LKey()}
		wrs[i] = verbs.SendWR{ID: uint64(i), Opcode: c.op, RemoteAddr: remote.Addr() + uint64(i)*128, RKey: remote.RKey(), Imm: 7}
		if c.size > 0 {
			wrs[i].SGL = sgl[i : i+1]
		}
		if c.inline {
			wrs[i].Flags |= verbs.FlagInline
		}
		if (i+1)%c.signalEvery == 0 {
			wrs[i].Flags |= verbs.FlagSignaled
		}
	}
	wc := make([]verbs.WC, 64)
	outstanding, done, next := 0, 0, 0
	pctx, cancel := context.WithTimeout(ctx, point+30*time.Second)
	defer cancel()
	start := time.Now()
	deadline := start.Add(point)
	for {
		now := time.Now()
		stopping := !now.Before(deadline)
		for !stopping && outstanding+list <= window {
			if err := qps[next%len(qps)].PostSend(wrs); err != nil {
				return 0, err
			}
			next++
			outstanding += list
		}
		if stopping && outstanding == 0 {
			break
		}
		n, err := verbs.PollWait(pctx, ccq, wc, verbs.PollAdaptive)
		if err != nil {
			return 0, err
		}
		for i := 0; i < n; i++ {
			if wc[i].Status != verbs.StatusSuccess {
				return 0, fmt.Errorf("completion %v", wc[i].Status)
			}
			outstanding -= c.signalEvery
			done += c.signalEvery
		}
	}
	elapsed := time.Since(start)
	close(stop)
	if err := <-serverDone; err != nil {
		return 0, err
	}
	return float64(done) / elapsed.Seconds() / 1e6, nil
}
