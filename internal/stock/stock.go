package stock

// Redis keys for a product; the hash tag keeps every key of one product in
// one Redis Cluster slot.
func lockKey(productID string) string    { return "lock:{" + productID + "}" }
func counterKey(productID string) string { return "stock:{" + productID + "}" }
