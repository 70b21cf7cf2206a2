package bench_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/rdmakit/rdmakit/bench"
)

// Register an experiment, then run it by name and render its table.
func Example() {
	bench.Register(bench.Experiment{
		Name:        "example-squares",
		Description: "squares of small numbers",
		Run: func(ctx context.Context, env *bench.Env) (*bench.Result, error) {
			r := &bench.Result{Title: "Squares", Columns: []bench.Column{{Name: "n"}, {Name: "n²"}}}
			for n := 1; n <= 3; n++ {
				r.AddRow(n, n*n)
			}
			return r, nil
		},
	})
	e, _ := bench.Lookup("example-squares")
	fmt.Println(e.Description)
	r, _, err := bench.Run(context.Background(), "example-squares", bench.Options{Quick: true})
	if err != nil {
		panic(err)
	}
	fmt.Print(bench.Table(r))
	fmt.Println(strings.HasPrefix(r.Meta.GoVersion, "go"), r.Meta.Quick)
	// Output:
	// squares of small numbers
	// | n | n² |
	// | ---: | ---: |
	// | 1 | 1 |
	// | 2 | 4 |
	// | 3 | 9 |
	// true true
}
