package arrowobj_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/rdmakit/rdmakit/objstore/arrowobj"
)

func Example() {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "city", Type: arrow.BinaryTypes.String},
		{Name: "people", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).AppendValues([]string{"Guangzhou", "Shenzhen"}, nil)
	b.Field(1).(*array.Int64Builder).AppendValues([]int64{18_827_000, 17_798_000}, nil)
	rec := b.NewRecordBatch()
	defer rec.Release()

	size, err := arrowobj.Size(rec)
	if err != nil {
		fmt.Println(err)
		return
	}
	obj := make([]byte, size) // with a store: the memory Create returns (or use Put)
	if _, err := arrowobj.Write(obj, rec); err != nil {
		fmt.Println(err)
		return
	}

	got, err := arrowobj.Read(obj) // the columns are obj's bytes, not a copy
	if err != nil {
		fmt.Println(err)
		return
	}
	defer got.Release()
	fmt.Println(got.NumRows(), got.Column(0).ValueStr(1), got.Column(1).ValueStr(1))
	// Output: 2 Shenzhen 17798000
}
