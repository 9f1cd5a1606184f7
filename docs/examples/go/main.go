// A Go client for compactlog, on stubs generated from proto/ with `buf generate`
// (see docs/grpc.md): create a LEDGER topic, publish two values of one key, compact,
// read the compacted view. Usage: go run . [HOST:PORT]
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	"google.golang.org/grpc"

	compactlogv1 "example.com/compactlog-go/gen/compactlog/v1"
)

func main() {
	address := "127.0.0.1:7650"
	if len(os.Args) > 1 {
		address = os.Args[1]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(ctx, address, grpc.WithInsecure(), grpc.WithBlock())
	if err != nil {
		log.Fatalf("dial %s: %v", address, err)
	}
	defer conn.Close()
	admin := compactlogv1.NewTopicAdminClient(conn)
	logs := compactlogv1.NewLogClient(conn)

	topic := fmt.Sprintf("go-example-%d", time.Now().UnixNano())
	if _, err := admin.CreateTopic(ctx, &compactlogv1.CreateTopicRequest{Name: topic}); err != nil {
		log.Fatalf("create: %v", err)
	}
	var records []*compactlogv1.Record
	for _, value := range []string{"189.1", "190.0"} {
		records = append(records, &compactlogv1.Record{Key: []byte("AAPL"), Value: []byte(value)})
	}
	published, err := logs.Publish(ctx, &compactlogv1.PublishRequest{Topic: topic, Records: records})
	if err != nil {
		log.Fatalf("publish: %v", err)
	}
	for _, id := range published.Ids {
		fmt.Printf("published %d:%d\n", id.LedgerId, id.EntryId)
	}
	status, err := admin.Compact(ctx, &compactlogv1.CompactRequest{Topic: topic, Wait: true})
	if err != nil {
		log.Fatalf("compact: %v", err)
	}
	fmt.Printf("compaction %s: kept %d of %d\n", status.State, status.LastRun.Kept, status.LastRun.Read)
	stream, err := logs.Read(ctx, &compactlogv1.ReadRequest{Topic: topic, ReadCompacted: true})
	if err != nil {
		log.Fatalf("read: %v", err)
	}
	for {
		batch, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatalf("read: %v", err)
		}
		for _, m := range batch.Messages {
			fmt.Printf("compacted %d:%d %s=%s\n", m.Id.LedgerId, m.Id.EntryId, m.Key, m.Value)
		}
	}
}
